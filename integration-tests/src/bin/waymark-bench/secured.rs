//! What TLS and API keys cost: the throughput and latency workloads again, on a second server
//! (fresh database of the same backend) started with `--auth` and TLS, its workers and clients
//! connected with a CA and keys made for the run. The report prints these beside the plaintext
//! figures of the same run, as ratios.

use waymark_integration_tests::{secured_server, Backend, TestDatabase};
use waymark_sdk::{ApiKeySpec, Client, Role};

use crate::{variant::Variant, Args};

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
    server.terminate();
    Ok(Variant {
        label: "with TLS and API keys",
        key: "secured",
        steps_per_s,
        p50_ms,
        p99_ms,
        note: String::new(),
    })
}
