//! TLS end to end, with certificates made for the test: clients and workers over TLS and mutual
//! TLS on both stores, strangers refused, a silent connection cut off by the handshake timeout,
//! and the server reaching PostgreSQL over TLS.
//!
//! Each test names the attempt it makes and the outcome it expects.

use std::{path::Path, process::Command, time::Duration};

use waymark_integration_tests::{
    wait_for_registration, waymark_bin, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, ConnectOptions, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn certs(dir: &Path) -> std::path::PathBuf {
    let d = dir.join("certs");
    waymark_integration_tests::certs::write(&d).unwrap();
    d
}

fn pem(path: std::path::PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// A server with TLS (and mutual TLS when `mutual`); the clients trust the test's CA.
async fn with_tls(backend: Backend, mutual: bool) -> Option<(TestDatabase, ServerProcess, std::path::PathBuf)> {
    let db = TestDatabase::new(backend).await?;
    let dir = certs(&db.dir);
    let mut args: Vec<String> = vec![
        "--tls-cert".into(),
        dir.join("server.pem").display().to_string(),
        "--tls-key".into(),
        dir.join("server.key").display().to_string(),
        // A handshake never begun is cut off soon (the default is 10 s).
        "--tls-handshake-timeout".into(),
        "1s".into(),
    ];
    let mut connect = ConnectOptions::from_env().tls_ca_pem(pem(dir.join("ca.pem")));
    if mutual {
        args.extend(["--tls-client-ca".into(), dir.join("ca.pem").display().to_string()]);
        connect = connect.client_identity_pem(pem(dir.join("client.pem")), pem(dir.join("client.key")));
    }
    args.extend(waymark_integration_tests::fast_recovery_args());
    let server = ServerProcess::start_secured(&db, &args, true, connect).await;
    Some((db, server, dir))
}

// Attempt: run a workflow over TLS; connect trusting another CA; connect in plaintext.
// Outcome: the workflow runs (client and worker over TLS); the others cannot connect.
async fn tls_carries_clients_and_workers_and_refuses_strangers(backend: Backend) {
    let Some((db, server, dir)) = with_tls(backend, false).await else {
        return;
    };
    let ca = dir.join("ca.pem").display().to_string();
    let _worker = WorkerProcess::start_with_env(
        &server.addr,
        &db.dir.join("effects.log"),
        10,
        "tls",
        &[("WAYMARK_TLS_CA", ca.as_str())],
    );
    let c = server.client().await;
    wait_for_registration(&c, "counted").await;
    c.start_json("counted", serde_json::json!({"steps": 3}), StartOptions::id("over-tls"))
        .await
        .unwrap();
    let done = c.await_workflow("over-tls", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    let stranger = ConnectOptions::new(&server.addr).tls_ca_pem(pem(dir.join("other-ca.pem")));
    let e = Client::connect_with(&stranger)
        .await
        .err()
        .expect("an unknown CA is refused");
    assert!(matches!(e, waymark_sdk::Error::Transport(_)), "{e:?}");
    let plain = format!("http://127.0.0.1:{}", server.port);
    let refused = match Client::connect(&plain).await {
        Err(_) => true,
        Ok(c) => c.get("over-tls").await.is_err(),
    };
    assert!(refused, "plaintext gets nothing from a TLS port");
    // A connection that never says hello is closed once the handshake timeout passes.
    let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, tokio::io::AsyncReadExt::read(&mut silent, &mut buf))
        .await
        .expect("closed by the server, not held open");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // The command line connects the same way.
    let out = Command::new(waymark_bin())
        .args([
            "workflow",
            "get",
            "over-tls",
            "--json",
            "--server",
            &server.addr,
            "--tls-ca",
            &ca,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS"));
}

// Attempt: connect to a mutual-TLS server without a client certificate, and with one.
// Outcome: refused without; served with.
async fn mutual_tls_requires_a_client_certificate(backend: Backend) {
    let Some((_db, server, dir)) = with_tls(backend, true).await else {
        return;
    };
    let without = ConnectOptions::new(&server.addr).tls_ca_pem(pem(dir.join("ca.pem")));
    let refused = match Client::connect_with(&without).await {
        Err(_) => true,
        Ok(c) => c
            .get("x")
            .await
            .is_err_and(|e| e.reason() != Some("WORKFLOW_NOT_FOUND")),
    };
    assert!(refused, "no client certificate, no service");
    let e = server.client().await.get("x").await.unwrap_err();
    assert_eq!(e.reason(), Some("WORKFLOW_NOT_FOUND"), "with one, served");
}

// Attempt: run the server on a PostgreSQL that takes TCP connections only over TLS: with
// sslmode=verify-full and its CA, with sslmode=require, with another CA, in plaintext.
// Outcome: the first two serve calls that read and write the database (with the pool size
// given); the last two never start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_is_reached_over_tls() {
    use waymark_integration_tests::postgres_cluster::PostgresCluster;
    let Some(cluster) = PostgresCluster::start_with_tls() else {
        return;
    };
    let base = cluster.url();
    let ca = cluster.ca_pem();
    let other_ca = ca.with_file_name("other-ca.pem");
    let db = |url: String| TestDatabase {
        url,
        dir: cluster.database().dir,
    };
    for url in [
        format!("{base}?sslmode=verify-full&sslrootcert={}", ca.display()),
        format!("{base}?sslmode=require"),
    ] {
        let args: Vec<String> = vec!["--db-pool-size".into(), "4".into()];
        let server = ServerProcess::start(&db(url.clone()), &args).await;
        let c = server.client().await;
        let name = format!("tls-{}", url.contains("verify-full"));
        c.create_queue(&name, &waymark_sdk::QueueLimits::default())
            .await
            .unwrap();
        assert!(c.list_queues().await.unwrap().iter().any(|q| q.name == name), "{url}");
    }
    for (url, why) in [
        (
            format!("{base}?sslmode=verify-full&sslrootcert={}", other_ca.display()),
            "a CA that did not sign it",
        ),
        (format!("{base}?sslmode=disable"), "plaintext"),
    ] {
        let out = tokio::time::timeout(
            PATIENCE,
            tokio::process::Command::new(waymark_bin())
                .args(["server", "--database-url", &url, "--listen", "127.0.0.1:0"])
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the server gives up")
        .unwrap();
        assert!(!out.status.success(), "{why}: started anyway");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot open the PostgreSQL database"), "{why}: {err}");
    }
}

waymark_integration_tests::on_both_stores!(
    tls_carries_clients_and_workers_and_refuses_strangers,
    mutual_tls_requires_a_client_certificate,
);
