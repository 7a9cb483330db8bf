//! Where the figures were measured: the kernel, the CPUs, and the file system each database
//! lives on. Commit rates depend on the disk and its mount far more than on Waymark, so two
//! reports are comparable only when these match.

use std::{path::Path, process::Command};

/// One line about this machine: kernel, architecture, CPUs, memory and the load when asked.
pub fn describe() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown model".into());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "? GiB".into());
    // Other tenants' load on a shared machine moves every figure.
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    format!(
        "Linux {kernel} {}, {cpus} CPUs ({model}), {mem_gib} memory, load average {load} at the start",
        std::env::consts::ARCH
    )
}

/// The file system holding `dir`: its type, device, mount point and mount options (from
/// `df -PT` and /proc/self/mounts), e.g. `ext4 (/dev/vda on /, rw,relatime)`.
pub fn filesystem(dir: &Path) -> anyhow::Result<String> {
    let out = Command::new("df").arg("-PT").arg(dir).output()?;
    anyhow::ensure!(
        out.status.success(),
        "df -PT {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Filesystem Type 1024-blocks Used Available Capacity Mounted-on (which may hold spaces).
    let fields: Vec<&str> = text
        .lines()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("df -PT {}: no output", dir.display()))?
        .split_whitespace()
        .collect();
    anyhow::ensure!(
        fields.len() >= 7,
        "df -PT {}: unexpected output {text:?}",
        dir.display()
    );
    let (source, fs_type, mount) = (fields[0], fields[1], fields[6..].join(" "));
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    // The last entry for a mount point is the one in effect.
    let options = mounts
        .lines()
        .rev()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1].replace("\\040", " ") == mount).then(|| f[3].to_string())
        })
        .unwrap_or_else(|| "options unknown".into());
    Ok(format!("{fs_type} ({source} on {mount}, {options})"))
}

/// The data directory of the PostgreSQL server at `url` (needs a superuser or
/// pg_read_all_settings, as the throwaway server's `postgres` user is).
pub async fn pg_data_directory(url: &str) -> anyhow::Result<String> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let row = sqlx::query("SELECT current_setting('data_directory')")
        .fetch_one(&mut conn)
        .await?;
    let dir: String = row.try_get(0)?;
    conn.close().await?;
    Ok(dir)
}

/// Where the database of `backend` at `url` lives (its directory) and on what file system; an
/// explanation instead when that cannot be told (a PostgreSQL server on another machine).
pub async fn database_filesystem(backend: waymark_integration_tests::Backend, url: &str, dir: &Path) -> String {
    let dir = match backend {
        waymark_integration_tests::Backend::Sqlite => Ok(dir.display().to_string()),
        waymark_integration_tests::Backend::Postgres => pg_data_directory(url).await,
    };
    match dir {
        Ok(d) => match filesystem(Path::new(&d)) {
            Ok(fs) => format!("{fs}; {d}"),
            Err(e) => format!("unknown ({e:#}; not on this machine?)"),
        },
        Err(e) => format!("unknown (data directory not readable: {e:#})"),
    }
}
