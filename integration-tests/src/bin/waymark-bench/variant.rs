//! The throughput and latency workloads run again on a second server set up another way (with
//! TLS and API keys, or with traces exported and metrics scraped), printed beside the plain
//! figures of the same run as ratios — what that setup costs.

use waymark_sdk::{Client, ConnectOptions};

use crate::{latency, percentile, spawn_workers, throughput, wait_for_workers, Args};

/// Workloads 1 and 2 on a server set up one way.
pub struct Variant {
    /// What differs ("with TLS and API keys").
    pub label: &'static str,
    /// Its key in the one-line summary (`secured` → `secured_steps_per_s`).
    pub key: &'static str,
    pub steps_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Anything else it measured, for the report.
    pub note: String,
    /// The latency workload while 64 clients send made-up keys (the secured server only).
    pub flood: Option<Flood>,
}

/// One-step latency on the secured server idle and under a flood of made-up keys.
pub struct Flood {
    pub clients: usize,
    pub idle_p50_ms: f64,
    pub flooded_p50_ms: f64,
    pub flooded_p99_ms: f64,
    /// Made-up-key calls refused while the flooded latency was measured.
    pub refused: u64,
}

/// Runs the throughput and latency workloads with workers connecting with `workers` and
/// clients with `clients`.
pub async fn measure(
    args: &Args,
    workers: &ConnectOptions,
    clients: &ConnectOptions,
) -> anyhow::Result<(f64, f64, f64)> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = spawn_workers(args, workers, &stop_rx);
    wait_for_workers(&Client::connect_with(clients).await?).await?;
    let (_, wall_s) = throughput(args, clients).await?;
    let lat = latency(args.latency_runs, clients).await?;
    let _ = stop_tx.send(true);
    for w in running {
        let _ = w.await;
    }
    Ok((
        args.workflows as f64 * args.steps as f64 / wall_s,
        percentile(&lat, 50.0),
        percentile(&lat, 99.0),
    ))
}
