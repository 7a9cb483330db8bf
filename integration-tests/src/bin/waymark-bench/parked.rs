//! Server memory with many parked workflows: N `sleeper` workflows each sleep an hour, so each
//! parks at once (released from its worker); the server's resident set size is read from
//! `/proc` before the starts and once every one is parked.

use std::time::{Duration, Instant};

use waymark_sdk::{Client, StartOptions, WorkflowContext, WorkflowError, WorkflowStatus};

/// Sleeps an hour: longer than any park threshold, so it parks.
pub async fn sleeper(ctx: WorkflowContext, _input: serde_json::Value) -> Result<u32, WorkflowError> {
    ctx.sleep(Duration::from_secs(3600)).await?;
    Ok(0)
}

pub struct Parked {
    pub workflows: usize,
    pub seconds: f64,
    pub rss_before_mb: f64,
    pub rss_parked_mb: f64,
}

/// Resident set size of process `pid`, in MiB (Linux).
pub fn rss_mb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS for pid {pid}"))?;
    Ok(kb / 1024.0)
}

pub async fn run(n: usize, addr: &str, server_pid: u32) -> anyhow::Result<Parked> {
    let rss_before_mb = rss_mb(server_pid)?;
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    let per = n.div_ceil(16);
    for c in 0..16 {
        let client = Client::connect(addr).await?;
        tasks.push(tokio::spawn(async move {
            for i in (c * per)..((c + 1) * per).min(n) {
                client
                    .start_json(
                        "sleeper",
                        serde_json::json!(null),
                        StartOptions::id(format!("parked-{i}")),
                    )
                    .await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    eprintln!(
        "[parked] {n} starts acknowledged after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let client = Client::connect(addr).await?;
    while crate::verify::any_in(&client, "sleeper", &[WorkflowStatus::Enqueued, WorkflowStatus::Pending]).await? {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(1800),
            "sleepers still enqueued or running 30 min after the first start"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let seconds = t0.elapsed().as_secs_f64();
    // Let anything transient (buffers of the start burst) be released before reading.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_parked_mb = rss_mb(server_pid)?;
    // The figure is "RSS with N parked": N must really be parked, not failed or finished. Read
    // after the RSS, so listing them does not weigh on it.
    crate::verify::expect_parked(&client, "sleeper", "parked-", n).await?;
    Ok(Parked {
        workflows: n,
        seconds,
        rss_before_mb,
        rss_parked_mb,
    })
}
