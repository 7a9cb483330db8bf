//! What is exposed beyond loopback: the metrics door, unauthenticated streams per address, the
//! server and the CLI refusing plaintext keys and unprotected listeners.

use tonic::Code;
use waymark_integration_tests::{wait_for, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::Role;

use super::*;

// Attempt: read /metrics from a metrics listener beyond loopback with no key, a worker key, a
// made-up key; ask /readyz the same; start one without --auth. Outcome: /metrics 401 each time
// (a key that may read gets 200); /readyz answers its status to all (probes send no key) and
// names nothing; /healthz stays open; the server refuses to start without --auth.
async fn metrics_beyond_loopback_need_a_key(backend: Backend) {
    let port = waymark_integration_tests::free_port();
    let listen = format!("0.0.0.0:{port}");
    let Some((_db, server, admin_key)) = with_auth(backend, &["--metrics-listen", &listen]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, reader_key) = make_key(&admin, Role::Reader, &[]).await;
    let (_, worker_key) = make_key(&admin, Role::Worker, &[]).await;
    let fake = format!("wmk_{}_{}", "0".repeat(16), "0".repeat(64));
    let get = |path: &'static str, key: Option<String>| async move {
        waymark_integration_tests::http_get_with(port, path, key.as_deref())
            .await
            .unwrap()
    };
    for key in [
        None,
        Some(worker_key.clone()),
        Some(fake.clone()),
        Some("garbage".to_string()),
    ] {
        let (status, body) = get("/metrics", key.clone()).await;
        assert_eq!(status, 401, "/metrics with {key:?}: {body}");
        assert!(!body.contains("waymark_"), "{body}");
        assert_eq!(
            get("/readyz", key.clone()).await,
            (200, "ready\n".to_string()),
            "{key:?}"
        );
    }
    for path in ["/metrics", "/readyz"] {
        assert_eq!(
            get(path, Some(reader_key.clone())).await.0,
            200,
            "{path} with a reader key"
        );
    }
    let (status, scrape) = get("/metrics", Some(admin_key.clone())).await;
    assert_eq!(status, 200);
    assert!(scrape.contains("waymark_rpc_requests_total"), "{scrape}");
    assert_eq!(get("/healthz", None).await.0, 200, "liveness needs no key");
    let other = waymark_integration_tests::free_port();
    let text = server_refuses(&["--metrics-listen", &format!("0.0.0.0:{other}")]).await;
    assert!(
        text.contains("refusing to serve metrics") && text.contains("--auth"),
        "{text}"
    );
}

// Attempt: open more health Watch streams from one address than it may hold, with no key.
// Outcome: past the cap, RESOURCE_EXHAUSTED (TOO_MANY_STREAMS); once one closes, another opens.
async fn unauthenticated_streams_are_capped_per_address(backend: Backend) {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let Some((_db, server, _admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let watch = || {
        let mut h = HealthClient::new(channel.clone());
        async move { h.watch(HealthCheckRequest { service: String::new() }).await }
    };
    let mut open = Vec::new();
    for _ in 0..8 {
        let mut s = watch().await.expect("within the cap").into_inner();
        s.message().await.unwrap().expect("the first status");
        open.push(s);
    }
    let e = watch()
        .await
        .expect_err("past the cap (auth/peers.rs: STREAMS_PER_PEER)");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(format!("{e:?}").contains("TOO_MANY_STREAMS"), "{e:?}");
    drop(open.pop());
    wait_for("a place to come free", PATIENCE, || async { watch().await.ok() }).await;
}

/// Runs `waymark server` with `args` until it exits by itself (or answers, which fails).
async fn server_refuses(args: &[&str]) -> String {
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let out = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new(waymark_bin())
            .arg("server")
            .args(["--database-url", &db.url])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the server exits at once")
    .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).to_string()
}

// Attempt: the CLI with a key and a plaintext address that is not loopback (0.0.0.0 reaches
// this machine, but is not a loopback address). Outcome: refused before anything is sent,
// naming --insecure and never the key; with --insecure or WAYMARK_INSECURE=1 it goes through,
// and on 127.0.0.1 nothing is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_to_send_a_key_in_clear_beyond_loopback() {
    let (_db, server, admin_key) = with_auth(Backend::Sqlite, &[]).await.unwrap();
    let cli = |address: String, extra: &'static [&'static str], env: &'static [(&'static str, &'static str)]| {
        let key = admin_key.clone();
        async move {
            let out = tokio::process::Command::new(waymark_bin())
                .args(["queue", "list", "--server", &address, "--api-key", &key])
                .args(extra)
                .env_remove("WAYMARK_INSECURE")
                .envs(env.iter().copied())
                .kill_on_drop(true)
                .output()
                .await
                .unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stderr).to_string())
        }
    };
    let remote = format!("http://0.0.0.0:{}", server.port);
    let (ok, err) = cli(remote.clone(), &[], &[]).await;
    assert!(
        !ok && err.contains("unencrypted") && err.contains("--insecure"),
        "{err}"
    );
    assert!(!err.contains(admin_key.rsplit('_').next().unwrap()), "{err}");
    assert_eq!(cli(remote.clone(), &["--insecure"], &[]).await, (true, String::new()));
    assert_eq!(
        cli(remote, &[], &[("WAYMARK_INSECURE", "1")]).await,
        (true, String::new())
    );
    let local = format!("http://127.0.0.1:{}", server.port);
    assert_eq!(cli(local, &[], &[]).await, (true, String::new()));
}

// Attempt: listen on every interface without authentication, or with it but without TLS.
// Outcome: the server refuses to start, saying how to turn them on; --insecure overrides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_beyond_loopback_unprotected_is_refused() {
    let port = waymark_integration_tests::free_port().to_string();
    let everywhere = format!("0.0.0.0:{port}");
    let text = server_refuses(&["--listen", &everywhere]).await;
    assert!(
        text.contains("without authentication and TLS") && text.contains("--insecure"),
        "{text}"
    );
    let text = server_refuses(&["--listen", &everywhere, "--auth"]).await;
    assert!(text.contains("without TLS"), "{text}");
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let args: Vec<String> = vec!["--insecure".into()];
    // On loopback (the default) nothing is needed; --insecure is accepted there as well.
    let s = ServerProcess::start(&db, &args).await;
    s.client().await.list_queues().await.unwrap();
}

waymark_integration_tests::on_both_stores!(
    metrics_beyond_loopback_need_a_key,
    unauthenticated_streams_are_capped_per_address,
);
