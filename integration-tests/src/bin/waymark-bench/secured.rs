//! What TLS and API keys cost: the throughput and latency workloads again, on a second server
//! (fresh database of the same backend) started with `--auth` and TLS, its workers and clients
//! connected with a CA and keys made for the run. The report prints these beside the plaintext
//! figures of the same run, as ratios.

use waymark_integration_tests::{secured_server, Backend, TestDatabase};
use waymark_sdk::{ApiKeySpec, Client, Role};

use crate::{latency, percentile, spawn_workers, throughput, wait_for_workers, Args};

pub struct Secured {
    pub steps_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

async fn key(admin: &Client, role: Role) -> anyhow::Result<String> {
    let (_, text) = admin
        .create_api_key(&ApiKeySpec {
            name: format!("bench {role:?}"),
            role,
            namespaces: vec![],
            name_patterns: vec![],
            expires_at_ms: None,
        })
        .await?;
    Ok(text)
}

pub async fn run(args: &Args, backend: Backend) -> anyhow::Result<Secured> {
    let db = TestDatabase::new(backend)
        .await
        .ok_or_else(|| anyhow::anyhow!("no database"))?;
    let (mut server, admin_key) = secured_server(&db, &[]).await;
    let admin = Client::connect_with(&server.connect.clone().api_key(admin_key)).await?;
    let workers = server.connect.clone().api_key(key(&admin, Role::Worker).await?);
    let clients = server.connect.clone().api_key(key(&admin, Role::Client).await?);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = spawn_workers(args, &workers, &stop_rx);
    wait_for_workers(&Client::connect_with(&clients).await?).await?;
    let (_, wall_s) = throughput(args, &clients).await?;
    let lat = latency(args.latency_runs, &clients).await?;
    let _ = stop_tx.send(true);
    for w in running {
        let _ = w.await;
    }
    server.terminate();
    Ok(Secured {
        steps_per_s: args.workflows as f64 * args.steps as f64 / wall_s,
        p50_ms: percentile(&lat, 50.0),
        p99_ms: percentile(&lat, 99.0),
    })
}
