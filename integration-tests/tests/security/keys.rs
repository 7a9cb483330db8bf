//! API keys: no key, a wrong one, each role, an expired key, a flood of made-up keys, an admin
//! key made outside the server.

use tonic::Code;
use waymark_integration_tests::{wait_for, wait_for_registration, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{ApiKeySpec, Client, ConnectOptions, Role, StartOptions, WorkflowStatus};

use super::*;

// Attempt: call without a key, with a malformed one, with a made-up one of the right shape.
// Outcome: UNAUTHENTICATED, the same answer for each, and health checks still answer.
async fn calls_without_a_valid_key_are_unauthenticated(backend: Backend) {
    let Some((_db, server, admin)) = with_auth(backend, &[]).await else {
        return;
    };
    let fake = format!("wmk_{}_{}", "0".repeat(16), "0".repeat(64));
    let garbage = "x".repeat(8 * 1024);
    for key in [None, Some("not a key"), Some(fake.as_str()), Some(garbage.as_str())] {
        let mut o = server.connect.clone();
        if let Some(k) = key {
            o = o.api_key(k);
        }
        let c = Client::connect_with(&o).await.unwrap();
        let e = c.get("anything").await.unwrap_err();
        assert_eq!(
            reason(&e),
            (Some(Code::Unauthenticated), "UNAUTHENTICATED".into()),
            "{key:?}"
        );
        assert!(!e.to_string().contains("anything"), "no hint of what exists: {e}");
    }
    // The admin key with one character of its secret changed is nobody.
    let last = if admin.ends_with('0') { '1' } else { '0' };
    let tampered = format!("{}{last}", &admin[..admin.len() - 1]);
    assert_ne!(tampered, admin);
    let e = client_with(&server, &tampered).await.list_queues().await.unwrap_err();
    assert_eq!(reason(&e).1, "UNAUTHENTICATED");
    // The admin key itself works.
    client_with(&server, &admin).await.list_queues().await.unwrap();
}

// Attempt: a reader starts, cancels and creates queues; a client manages keys; a worker key
// makes client calls. Outcome: PERMISSION_DENIED each time; what the role allows succeeds.
async fn roles_allow_only_what_they_name(backend: Backend) {
    let Some((db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, reader_key) = make_key(&admin, Role::Reader, &[]).await;
    let (_, client_key) = make_key(&admin, Role::Client, &[]).await;
    let (_, worker_key) = make_key(&admin, Role::Worker, &[]).await;
    let _worker = worker_with_key(&server, &db, "w", &worker_key);
    let client = client_with(&server, &client_key).await;
    wait_for_registration(&client, "counted").await;
    client
        .start_json("counted", serde_json::json!({"steps": 2}), StartOptions::id("wf-1"))
        .await
        .unwrap();
    let done = client.await_workflow("wf-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "a worker key runs workflows");
    let reader = client_with(&server, &reader_key).await;
    assert_eq!(reader.get("wf-1").await.unwrap().status, WorkflowStatus::Success);
    assert_eq!(reader.steps("wf-1").await.unwrap().len(), 2);
    let denied =
        |e: waymark_sdk::Error| assert_eq!(reason(&e), (Some(Code::PermissionDenied), "PERMISSION_DENIED".into()));
    denied(reader.cancel("wf-1").await.unwrap_err());
    denied(
        reader
            .start_json("counted", serde_json::json!({"steps": 1}), StartOptions::id("wf-2"))
            .await
            .unwrap_err(),
    );
    denied(reader.create_queue("q", &Default::default()).await.unwrap_err());
    denied(client.list_api_keys().await.unwrap_err());
    denied(make_key_err(&client).await);
    let worker_as_client = client_with(&server, &worker_key).await;
    denied(worker_as_client.get("wf-1").await.unwrap_err());
    // Nothing the reader tried happened.
    let e = admin.get("wf-2").await.unwrap_err();
    assert_eq!(e.reason(), Some("WORKFLOW_NOT_FOUND"));
}

async fn make_key_err(c: &Client) -> waymark_sdk::Error {
    c.create_api_key(&ApiKeySpec {
        name: String::new(),
        role: Role::Admin,
        namespaces: vec![],
        name_patterns: vec![],
        expires_at_ms: None,
    })
    .await
    .unwrap_err()
}

// Attempt: use a key after it expires. Outcome: UNAUTHENTICATED once its time has passed.
async fn an_expired_key_stops_working(backend: Backend) {
    let Some((_db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (_, text) = admin
        .create_api_key(&ApiKeySpec {
            name: "short-lived".into(),
            role: Role::Reader,
            namespaces: vec![],
            name_patterns: vec![],
            expires_at_ms: Some(now + 1_500),
        })
        .await
        .unwrap();
    let c = client_with(&server, &text).await;
    wait_for("the key to expire", PATIENCE, || async {
        match c.list_queues().await {
            Err(e) if e.reason() == Some("UNAUTHENTICATED") => Some(()),
            Ok(_) => None,
            Err(e) => panic!("unexpected {e}"),
        }
    })
    .await;
    let e = admin
        .create_api_key(&ApiKeySpec {
            name: "already over".into(),
            role: Role::Reader,
            namespaces: vec![],
            name_patterns: vec![],
            expires_at_ms: Some(now - 1),
        })
        .await
        .unwrap_err();
    assert_eq!(e.reason(), Some("INVALID_ARGUMENT"));
}

// Attempt: 64 clients send well-formed made-up keys as fast as they are answered while a real
// client works. Outcome: every made-up call is UNAUTHENTICATED and every real call is answered.
// (How much the flood slows the real client is measured by `make bench`, not asserted here.)
async fn a_flood_of_made_up_keys_leaves_real_calls_answered(backend: Backend) {
    let Some((_db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let real = client_with(&server, &admin_key).await;
    // The real key is read once before the flood: every caller here shares one address, and
    // an address past its allowance of unknown-key reads is refused without a read, so a key
    // the server has never seen could be taken for one of the made-up ones. A key read once is
    // known for an hour and goes through whatever its neighbours send (auth/peers.rs).
    real.list_queues().await.expect("the real key is good");
    let flooders: Vec<_> = (0..64)
        .map(|i| {
            let connect = server.connect.clone();
            tokio::spawn(async move {
                let mut refused = 0;
                // Past the address's allowance each refusal waits a second: a few calls each
                // are enough to be past it.
                for n in 0..3 {
                    let fake = format!("wmk_{:016x}_{}", i * 1000 + n, "0".repeat(64));
                    let c = Client::connect_with(&connect.clone().api_key(fake)).await.unwrap();
                    let e = c.list_queues().await.expect_err("a made-up key");
                    assert_eq!(e.code(), Some(Code::Unauthenticated), "{e:?}");
                    refused += 1;
                }
                refused
            })
        })
        .collect();
    for _ in 0..100 {
        real.list_queues().await.expect("a real call is answered");
    }
    for f in flooders {
        assert_eq!(f.await.unwrap(), 3);
    }
}

// Attempt: a key made offline (`waymark key generate`) handed to the server as a file, as a
// Kubernetes Secret would be; restarts; the key revoked; a file holding garbage, and one
// holding a key whose id is taken by another secret. Outcome: the key works as an admin key, a
// restart changes nothing, a revoked key stays revoked across restarts, and the bad files stop
// the server at start, saying why.
async fn an_admin_key_made_elsewhere_is_registered_from_its_file(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let generated = std::process::Command::new(waymark_bin())
        .args(["key", "generate"])
        .output()
        .unwrap();
    assert!(generated.status.success());
    let text = String::from_utf8_lossy(&generated.stdout).trim().to_string();
    assert!(text.starts_with("wmk_") && text.len() == 4 + 16 + 1 + 64, "{text}");
    let file = db.dir.join("admin.key");
    std::fs::write(&file, format!("{text}\n")).unwrap();
    let mut args: Vec<String> = vec!["--auth".into(), "--key-cache-ttl".into(), "1s".into()];
    args.extend(["--admin-key-file".into(), file.display().to_string()]);
    let mut server = ServerProcess::start_secured(&db, &args, false, ConnectOptions::from_env()).await;
    let admin = client_with(&server, &text).await;
    let (_, other_admin) = admin
        .create_api_key(&ApiKeySpec {
            name: "a second admin".into(),
            role: Role::Admin,
            namespaces: vec!["*".into()],
            name_patterns: vec![],
            expires_at_ms: None,
        })
        .await
        .expect("the key from the file is an admin key of every namespace");
    server.restart().await;
    let listed = client_with(&server, &other_admin).await.list_api_keys().await.unwrap();
    assert_eq!(
        listed.iter().filter(|k| k.name == "admin key file").count(),
        1,
        "{listed:?}"
    );
    let key_id = &text[4..20];
    assert!(client_with(&server, &other_admin)
        .await
        .revoke_api_key(key_id)
        .await
        .unwrap());
    server.terminate();
    server.restart().await;
    let e = client_with(&server, &text).await.list_queues().await.unwrap_err();
    assert_eq!(e.reason(), Some("UNAUTHENTICATED"), "revoked stays revoked: {e:?}");
    server.terminate();

    for (content, says) in [
        ("not a key".to_string(), "does not hold an API key"),
        (format!("wmk_{key_id}_{}", "0".repeat(64)), "the id of another key"),
    ] {
        std::fs::write(&file, content).unwrap();
        let out = tokio::time::timeout(
            PATIENCE,
            tokio::process::Command::new(waymark_bin())
                .args(["server", "--database-url", &db.url, "--auth", "--console-listen", "off"])
                .args([
                    "--listen",
                    "127.0.0.1:0",
                    "--admin-key-file",
                    &file.display().to_string(),
                ])
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the server exits at once")
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{err}");
        assert!(!err.contains(&"0".repeat(64)), "the secret is not repeated: {err}");
    }
}

// Attempt: `waymark key create --role admin` with no --namespace, through a server and straight
// into a database. Outcome: a usage error (exit 2) naming --namespace, and no key made; with
// `--namespace '*'` it is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_key_from_the_cli_names_its_namespaces() {
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let key_cli = |extra: &'static [&'static str]| {
        let url = db.url.clone();
        async move {
            tokio::process::Command::new(waymark_bin())
                .args(["key", "create", "--role", "admin", "--database-url", &url])
                .args(extra)
                .kill_on_drop(true)
                .output()
                .await
                .unwrap()
        }
    };
    let out = key_cli(&[]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--namespace"), "{out:?}");
    assert!(out.stdout.is_empty(), "no key made: {out:?}");
    let out = key_cli(&["--namespace", "*"]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("wmk_"), "{out:?}");
}

waymark_integration_tests::on_both_stores!(
    calls_without_a_valid_key_are_unauthenticated,
    roles_allow_only_what_they_name,
    an_expired_key_stops_working,
    a_flood_of_made_up_keys_leaves_real_calls_answered,
    an_admin_key_made_elsewhere_is_registered_from_its_file,
);
