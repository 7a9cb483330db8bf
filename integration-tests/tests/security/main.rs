//! Security end to end, with real server and worker processes on both stores: API keys and their
//! roles, admin scope, revocation reaching open streams and long polls, worker keys limited to
//! what their patterns cover, worker ids bound to their key, remote-step results fenced to their
//! stream, the audit trail, the metrics door, what the unauthenticated may cost, and the
//! server's refusal to listen beyond loopback unprotected. TLS is `tls.rs`.
//!
//! Each test names the attempt it makes and the outcome it expects; together they are the
//! threat list docs/operators/secure.md summarizes. One file per threat: `keys.rs`,
//! `workers.rs`, `revocation.rs`, `audit.rs`, `exposure.rs`; what they share is here.

use std::time::Duration;

use tonic::Code;
use waymark_integration_tests::{Backend, ServerProcess, TestDatabase, WorkerProcess};
use waymark_sdk::{ApiKeySpec, Client, ConnectOptions, Role};

pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

pub(crate) fn reason(e: &waymark_sdk::Error) -> (Option<Code>, String) {
    (e.code(), e.reason().unwrap_or_default().to_string())
}

/// A server with --auth and its first admin key; the client holds that key.
pub(crate) async fn with_auth(backend: Backend, extra: &[&str]) -> Option<(TestDatabase, ServerProcess, String)> {
    let db = TestDatabase::new(backend).await?;
    let key_file = db.dir.join("admin.key");
    let mut args: Vec<String> = vec![
        "--auth".into(),
        "--init-admin-key-file".into(),
        key_file.display().to_string(),
        // Revocations reach this replica's cache within a second.
        "--key-cache-ttl".into(),
        "1s".into(),
    ];
    args.extend(waymark_integration_tests::fast_recovery_args());
    args.extend(extra.iter().map(|s| s.to_string()));
    let server = ServerProcess::start_secured(&db, &args, false, ConnectOptions::from_env()).await;
    let admin = std::fs::read_to_string(&key_file).unwrap().trim().to_string();
    Some((db, server, admin))
}

pub(crate) async fn client_with(server: &ServerProcess, key: &str) -> Client {
    Client::connect_with(&server.connect.clone().api_key(key))
        .await
        .unwrap()
}

pub(crate) async fn make_key(admin: &Client, role: Role, patterns: &[&str]) -> (String, String) {
    let (info, text) = admin
        .create_api_key(&ApiKeySpec {
            name: format!("{role:?} for a test"),
            role,
            namespaces: vec![],
            name_patterns: patterns.iter().map(|s| s.to_string()).collect(),
            expires_at_ms: None,
        })
        .await
        .unwrap();
    (info.key_id, text)
}

pub(crate) fn worker_with_key(server: &ServerProcess, db: &TestDatabase, name: &str, key: &str) -> WorkerProcess {
    WorkerProcess::start_with_env(
        &server.addr,
        &db.dir.join("effects.log"),
        10,
        name,
        &[("WAYMARK_API_KEY", key)],
    )
}

mod audit;
mod exposure;
mod keys;
mod revocation;
mod workers;
