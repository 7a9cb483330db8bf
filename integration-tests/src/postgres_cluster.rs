//! A PostgreSQL server of a test's own, from this machine's binaries (`initdb` + `pg_ctl` into a
//! temp dir), so the test can stop and restart it under load without disturbing other tests.
//! Stopped and deleted when dropped.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::{free_port, TestDatabase};

pub struct PostgresCluster {
    dir: PathBuf,
    port: u16,
    pg_ctl: PathBuf,
    as_postgres: bool,
}

/// `initdb`/`pg_ctl` from PATH, else Debian's versioned directory (newest first).
fn pg_bin(name: &str) -> Option<PathBuf> {
    if let Ok(out) = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output() {
        let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !found.is_empty() {
            return Some(PathBuf::from(found));
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .collect();
    dirs.sort_by_key(|d| {
        let v = d
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("");
        std::cmp::Reverse(v.parse::<u32>().unwrap_or(0))
    });
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.exists())
}

impl PostgresCluster {
    /// A new cluster, started. `None` when the machine has no PostgreSQL server binaries and the
    /// run allows skipping (see [`crate::skip_allowed`]); otherwise a missing binary panics.
    pub fn start() -> Option<PostgresCluster> {
        Self::start_with(false)
    }

    /// A new cluster that takes TCP connections only over TLS (`ssl = on`, `hostssl` the only
    /// TCP line of pg_hba.conf), with a certificate for 127.0.0.1 and localhost signed by the CA
    /// at [`ca_pem`](Self::ca_pem).
    pub fn start_with_tls() -> Option<PostgresCluster> {
        Self::start_with(true)
    }

    /// The CA that signed a TLS cluster's certificate (PEM file).
    pub fn ca_pem(&self) -> PathBuf {
        self.dir.join("certs").join("ca.pem")
    }

    fn start_with(tls: bool) -> Option<PostgresCluster> {
        let (Some(initdb), Some(pg_ctl)) = (pg_bin("initdb"), pg_bin("pg_ctl")) else {
            crate::skip_or_fail("no PostgreSQL server binaries (initdb, pg_ctl) on this machine");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("waymark-pgc-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        // initdb refuses to run as root: as root the cluster belongs to the postgres user.
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown").arg("postgres:").arg(&dir), "chown");
        }
        let cluster = PostgresCluster {
            port: free_port(),
            pg_ctl,
            as_postgres,
            dir,
        };
        let mut init = cluster.command(&initdb);
        init.args(["-D"]).arg(cluster.data()).args([
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
        ]);
        run(&mut init, "initdb");
        if tls {
            cluster.turn_on_tls();
        }
        cluster.pg_ctl_do(&["start"], None);
        Some(cluster)
    }

    fn turn_on_tls(&self) {
        let certs = self.dir.join("certs");
        crate::certs::write(&certs).unwrap();
        let data = self.data();
        for (from, to) in [("server.pem", "server.crt"), ("server.key", "server.key")] {
            std::fs::copy(certs.join(from), data.join(to)).unwrap();
            if self.as_postgres {
                run(Command::new("chown").arg("postgres:").arg(data.join(to)), "chown");
            }
            std::fs::set_permissions(data.join(to), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        }
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(
            &mut conf,
            b"\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
        )
        .unwrap();
        // Over TCP, TLS or nothing: a client that tried plaintext would be turned away.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn pg_ctl_do(&self, action: &[&str], mode: Option<&str>) {
        let mut c = self.command(&self.pg_ctl);
        c.arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("postgres.log"));
        c.args(["-w", "-t", "120"]);
        if let Some(m) = mode {
            c.args(["-m", m]);
        }
        c.arg("-o").arg(format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} -c max_connections=300 -c shared_buffers=64MB",
            self.port,
            self.dir.display()
        ));
        c.args(action);
        run(&mut c, &format!("pg_ctl {}", action.join(" ")));
    }

    /// `postgres://…/postgres` on this cluster.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A [`TestDatabase`] on this cluster's `postgres` database (the dir is the cluster's).
    pub fn database(&self) -> TestDatabase {
        let dir = self.dir.join("test");
        std::fs::create_dir_all(&dir).unwrap();
        TestDatabase { url: self.url(), dir }
    }

    /// `pg_ctl restart -m MODE` (`fast`: disconnect sessions and shut down cleanly; `immediate`:
    /// abort, as a crash does, with recovery from the WAL at start).
    pub fn restart(&self, mode: &str) {
        self.pg_ctl_do(&["restart"], Some(mode));
    }

    pub fn stop(&self, mode: &str) {
        self.pg_ctl_do(&["stop"], Some(mode));
    }

    pub fn start_again(&self) {
        self.pg_ctl_do(&["start"], None);
    }
}

impl Drop for PostgresCluster {
    fn drop(&mut self) {
        let mut c = self.command(&self.pg_ctl);
        c.arg("-D").arg(self.data()).args(["-m", "immediate", "-w", "stop"]);
        let _ = c.output();
        // WAYMARK_KEEP_TEST_DIRS=1 keeps the logs (server, workers, PostgreSQL) for a look.
        if std::env::var("WAYMARK_KEEP_TEST_DIRS").as_deref() == Ok("1") {
            eprintln!("kept {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn run(c: &mut Command, what: &str) {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
