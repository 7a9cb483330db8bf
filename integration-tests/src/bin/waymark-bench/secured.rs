//! What TLS and API keys cost: the throughput and latency workloads again, on a second server
//! (fresh database of the same backend) started with `--auth` and TLS, its workers and clients
//! connected with a CA and keys made for the run. The report prints these beside the plaintext
//! figures of the same run, as ratios.
//!
//! Then what the unauthenticated can cost others: the latency workload again while
//! [`FLOODERS`] clients call as fast as they can with well-formed made-up keys (a new key id each
//! call, so none is ever cached), as a ratio of the same workload on the same server just before.

use waymark_integration_tests::{secured_server, Backend, TestDatabase};
use waymark_sdk::{ApiKeySpec, Client, Role};

use crate::{
    variant::{Flood, Variant},
    Args,
};

/// Clients sending made-up keys at once.
const FLOODERS: usize = 64;

/// The latency workload idle, then under a flood of made-up keys: each flooder holds one TLS
/// connection (trusting `ca_pem`) and calls ListQueues on it as fast as it is answered, with a
/// new key id each call.
async fn flood(
    args: &Args,
    server: &waymark_integration_tests::ServerProcess,
    ca_pem: Vec<u8>,
    clients: &waymark_sdk::ConnectOptions,
) -> anyhow::Result<Flood> {
    use std::sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    };
    use waymark_proto::v1::{queue_service_client::QueueServiceClient, ListQueuesRequest};
    let idle = crate::latency(args.latency_runs, clients).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let tls = tonic::transport::ClientTlsConfig::new().ca_certificate(tonic::transport::Certificate::from_pem(ca_pem));
    let mut flooders = Vec::new();
    for i in 0..FLOODERS {
        let channel = tonic::transport::Channel::from_shared(server.addr.clone())?
            .tls_config(tls.clone())?
            .connect()
            .await?;
        let (stop, refused) = (stop.clone(), refused.clone());
        flooders.push(tokio::spawn(async move {
            let mut queues = QueueServiceClient::new(channel);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut req = tonic::Request::new(ListQueuesRequest::default());
                let fake = format!("Bearer wmk_{i:08x}{n:08x}_{}", "0".repeat(64));
                req.metadata_mut().insert("authorization", fake.parse().expect("ascii"));
                n += 1;
                if let Err(s) = queues.list_queues(req).await {
                    if s.code() == tonic::Code::Unauthenticated {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let flooded = crate::latency(args.latency_runs, clients).await;
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        let _ = f.await;
    }
    let flooded = flooded?;
    Ok(Flood {
        clients: FLOODERS,
        idle_p50_ms: crate::percentile(&idle, 50.0),
        flooded_p50_ms: crate::percentile(&flooded, 50.0),
        flooded_p99_ms: crate::percentile(&flooded, 99.0),
        refused: refused.load(Ordering::Relaxed),
    })
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

pub async fn run(args: &Args, backend: Backend) -> anyhow::Result<Variant> {
    let db = TestDatabase::new(backend)
        .await
        .ok_or_else(|| anyhow::anyhow!("no database"))?;
    let (mut server, admin_key) = secured_server(&db, &[]).await;
    let admin = Client::connect_with(&server.connect.clone().api_key(admin_key)).await?;
    let workers = server.connect.clone().api_key(key(&admin, Role::Worker).await?);
    let clients = server.connect.clone().api_key(key(&admin, Role::Client).await?);
    let (steps_per_s, p50_ms, p99_ms) = crate::variant::measure(args, &workers, &clients).await?;
    // Workers again for the flood's latency workload.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let running = crate::spawn_workers(args, &workers, &stop_rx);
    crate::wait_for_workers(&Client::connect_with(&clients).await?).await?;
    let ca = std::fs::read(db.dir.join("certs").join("ca.pem"))?;
    let flood = flood(args, &server, ca, &clients).await;
    let _ = stop_tx.send(true);
    for w in running {
        let _ = w.await;
    }
    let flood = flood?;
    server.terminate();
    Ok(Variant {
        label: "with TLS and API keys",
        key: "secured",
        steps_per_s,
        p50_ms,
        p99_ms,
        note: String::new(),
        flood: Some(flood),
    })
}
