//! Revocation: an open worker stream and open long polls end when their key is revoked.

use std::time::Duration;

use tonic::Code;
use waymark_integration_tests::{raw_worker::RawWorker, wait_for, Backend, ServerProcess};
use waymark_sdk::{ConnectOptions, Role, StartOptions};

use super::*;

// Attempt: keep a worker stream open after its key is revoked, on the replica that revoked it
// and (PostgreSQL) on another replica. Outcome: both streams are closed with UNAUTHENTICATED
// and the SDK worker stops; new calls with the key are refused.
async fn revoking_a_key_closes_its_streams(backend: Backend) {
    let Some((db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (key_id, worker_key) = make_key(&admin, Role::Worker, &[]).await;
    let mut sdk_worker = worker_with_key(&server, &db, "revoked", &worker_key);
    let hello = RawWorker::hello_of("raw-revoked", &["counted"]);
    let mut raw = RawWorker::hello_with_key(&server.addr, hello, Some(&worker_key))
        .await
        .unwrap();
    // A second replica on the same database, when the store allows one.
    let other = if backend == Backend::Postgres {
        let mut args: Vec<String> = vec!["--auth".into(), "--key-cache-ttl".into(), "1s".into()];
        args.extend(waymark_integration_tests::fast_recovery_args());
        Some(ServerProcess::start_secured(&db, &args, false, ConnectOptions::from_env()).await)
    } else {
        None
    };
    let mut raw_elsewhere = match &other {
        Some(o) => Some(
            RawWorker::hello_with_key(&o.addr, RawWorker::hello_of("raw-2", &["counted"]), Some(&worker_key))
                .await
                .unwrap(),
        ),
        None => None,
    };
    sdk_worker.wait_connected().await;
    assert!(admin.revoke_api_key(&key_id).await.unwrap());
    assert!(!admin.revoke_api_key(&key_id).await.unwrap(), "revoked once");
    let s = raw.closed_with().await;
    assert_eq!(s.code(), Code::Unauthenticated);
    if let Some(r) = raw_elsewhere.as_mut() {
        assert_eq!(
            r.closed_with().await.code(),
            Code::Unauthenticated,
            "the other replica closes it too"
        );
    }
    assert_eq!(sdk_worker.wait_exit(PATIENCE).await, Some(1), "the SDK worker stops");
    assert!(sdk_worker.log_text().contains("UNAUTHENTICATED"));
    let hello = RawWorker::hello_of("raw-again", &["counted"]);
    let e = RawWorker::hello_with_key(&server.addr, hello, Some(&worker_key))
        .await
        .err()
        .expect("refused");
    assert_eq!(e.code(), Code::Unauthenticated);
    let listed = admin.list_api_keys().await.unwrap();
    assert!(listed.iter().any(|k| k.key_id == key_id && k.revoked_at_ms.is_some()));
}

// Attempt: keep an AwaitWorkflow, a GetEvent and a ReadStream open on a workflow that never
// ends, then revoke their key. Outcome: each ends with UNAUTHENTICATED within seconds, long
// before its own timeout.
async fn revoking_a_key_ends_its_long_polls(backend: Backend) {
    use futures::StreamExt;
    let port = waymark_integration_tests::free_port();
    let listen = format!("127.0.0.1:{port}");
    let Some((_db, server, admin_key)) = with_auth(backend, &["--metrics-listen", &listen]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (key_id, client_key) = make_key(&admin, Role::Client, &[]).await;
    let client = client_with(&server, &client_key).await;
    client
        .start_json(
            "never.run",
            serde_json::json!({}),
            StartOptions {
                allow_unregistered: true,
                ..StartOptions::id("forever")
            },
        )
        .await
        .unwrap();
    let hour = Duration::from_secs(3600);
    let awaiting = tokio::spawn({
        let c = client.clone();
        async move { c.await_workflow("forever", Some(hour)).await }
    });
    let event = tokio::spawn({
        let c = client.clone();
        async move { c.get_event("forever", "never", Some(hour)).await }
    });
    let mut stream = client.read_stream("forever", "out", 0).await.unwrap();
    // Revoked only once the server holds all three waits, so each is ended, not refused.
    wait_for("the three waits to be registered", PATIENCE, || async {
        (waymark_integration_tests::waits_gauge(port, "default").await? == 3).then_some(())
    })
    .await;
    assert!(admin.revoke_api_key(&key_id).await.unwrap());
    let unauthenticated = |r: Result<(), waymark_sdk::Error>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(
            reason(&e),
            (Some(Code::Unauthenticated), "UNAUTHENTICATED".into()),
            "{what}"
        );
    };
    let ended = tokio::time::timeout(PATIENCE, async {
        unauthenticated(awaiting.await.unwrap().map(|_| ()), "AwaitWorkflow");
        unauthenticated(event.await.unwrap().map(|_| ()), "GetEvent");
        let next = stream.next().await.expect("an error, not the end");
        unauthenticated(next.map(|_| ()), "ReadStream");
    })
    .await;
    assert!(ended.is_ok(), "the long polls ended within {PATIENCE:?}");
}

waymark_integration_tests::on_both_stores!(revoking_a_key_closes_its_streams, revoking_a_key_ends_its_long_polls,);
