//! Namespaces end to end, with real server and worker processes on both stores: two namespaces
//! run workflows of the same ids side by side without crossing; queues are per namespace; a
//! worker attached in one never gets another's work; a key acts only in its namespaces; a
//! namespace is deleted (refused while it holds unfinished work, unless forced) on every
//! replica.

use std::time::Duration;

use tonic::Code;
use waymark_integration_tests::{
    raw_worker::RawWorker, side_effects, wait_for, wait_for_registration, Backend, ServerProcess, TestDatabase,
    WorkerProcess,
};
use waymark_sdk::{ApiKeySpec, Client, QueueLimits, Role, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

async fn in_ns(server: &ServerProcess, ns: &str) -> Client {
    Client::connect_with(&server.connect.clone().namespace(ns))
        .await
        .unwrap()
}

fn worker_in(server: &ServerProcess, db: &TestDatabase, ns: &str) -> WorkerProcess {
    WorkerProcess::start_with_env(
        &server.addr,
        &db.dir.join(format!("effects-{ns}.log")),
        10,
        ns,
        &[("WAYMARK_NAMESPACE", ns)],
    )
}

async fn server(backend: Backend, extra: &[&str]) -> Option<(TestDatabase, ServerProcess)> {
    let db = TestDatabase::new(backend).await?;
    let mut args = waymark_integration_tests::fast_recovery_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let s = ServerProcess::start(&db, &args).await;
    Some((db, s))
}

fn reason(e: &waymark_sdk::Error) -> String {
    e.reason().unwrap_or_default().to_string()
}

// Attempt: the same workflow id, queue name and message in two namespaces at once, a send
// across, a read from the default namespace. Outcome: each runs on its own namespace's worker
// with its own input; nothing is visible across.
async fn two_namespaces_run_the_same_ids_without_crossing(backend: Backend) {
    let Some((db, server)) = server(backend, &[]).await else {
        return;
    };
    let admin = server.client().await;
    for ns in ["blue", "green"] {
        admin.create_namespace(ns).await.unwrap();
    }
    let e = admin.create_namespace("blue").await.unwrap_err();
    assert_eq!(reason(&e), "NAMESPACE_EXISTS");
    let _blue_worker = worker_in(&server, &db, "blue");
    let _green_worker = worker_in(&server, &db, "green");
    let blue = in_ns(&server, "blue").await;
    let green = in_ns(&server, "green").await;
    wait_for_registration(&blue, "counted").await;
    wait_for_registration(&green, "counted").await;
    // The default namespace has no worker: its registry is its own.
    let e = admin
        .start_json("counted", serde_json::json!({"steps": 1}), StartOptions::id("same"))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NAME_UNKNOWN");
    blue.start_json("counted", serde_json::json!({"steps": 2}), StartOptions::id("same"))
        .await
        .unwrap();
    green
        .start_json("counted", serde_json::json!({"steps": 3}), StartOptions::id("same"))
        .await
        .unwrap();
    let b = blue.await_workflow("same", Some(PATIENCE)).await.unwrap();
    let g = green.await_workflow("same", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (b.status, b.output),
        (WorkflowStatus::Success, Some(serde_json::json!(2)))
    );
    assert_eq!(
        (g.status, g.output),
        (WorkflowStatus::Success, Some(serde_json::json!(3)))
    );
    // Each ran on its own namespace's worker only.
    let effects = |ns: &str| side_effects::read(&db.dir.join(format!("effects-{ns}.log"))).len();
    assert_eq!((effects("blue"), effects("green")), (2, 3));
    assert_eq!(blue.steps("same").await.unwrap().len(), 2);
    assert_eq!(reason(&admin.get("same").await.unwrap_err()), "WORKFLOW_NOT_FOUND");
    // A workflow only green has is not found from blue, for reads and sends alike.
    green
        .start_json(
            "counted",
            serde_json::json!({"steps": 1}),
            StartOptions::id("green-only"),
        )
        .await
        .unwrap();
    assert_eq!(reason(&blue.get("green-only").await.unwrap_err()), "WORKFLOW_NOT_FOUND");
    let e = blue
        .send_message("green-only", "topic", &serde_json::json!(1), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(Code::NotFound), "{e:?}");
    let (listed, _) = blue.list(Default::default()).await.unwrap();
    let mut ids: Vec<&str> = listed.iter().map(|w| w.workflow_id.as_str()).collect();
    ids.sort();
    // Its own workflow and the harness's registration probe; not green's.
    assert_eq!(ids, ["registration-probe-counted", "same"], "blue lists only its own");
    // Queues too.
    blue.create_queue("orders", &QueueLimits::default()).await.unwrap();
    assert_eq!(reason(&green.get_queue("orders").await.unwrap_err()), "QUEUE_NOT_FOUND");
    green.create_queue("orders", &QueueLimits::default()).await.unwrap();
    // An unknown namespace is NOT_FOUND, and a malformed one never reaches a store.
    for ns in ["nowhere", "../etc", "UPPER"] {
        let e = in_ns(&server, ns).await.get("same").await.unwrap_err();
        assert_eq!(reason(&e), "NAMESPACE_NOT_FOUND", "{ns}");
    }
    let names: Vec<String> = admin
        .list_namespaces()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, ["blue", "default", "green"]);
}

// Attempt: a key for one namespace used in another, for calls and for a worker stream; a key
// made for a namespace that does not exist. Outcome: PERMISSION_DENIED; NAMESPACE_NOT_FOUND.
async fn keys_act_only_in_their_namespaces(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let (server, _, admin) = waymark_integration_tests::keyed_server(&db, &[]).await;
    admin.create_namespace("blue").await.unwrap();
    admin.create_namespace("green").await.unwrap();
    let spec = |role, ns: &str| ApiKeySpec {
        name: format!("{ns} key"),
        role,
        namespaces: vec![ns.into()],
        name_patterns: vec![],
        expires_at_ms: None,
    };
    let (_, blue_client) = admin.create_api_key(&spec(Role::Client, "blue")).await.unwrap();
    let (_, blue_worker) = admin.create_api_key(&spec(Role::Worker, "blue")).await.unwrap();
    let e = admin.create_api_key(&spec(Role::Client, "nowhere")).await.unwrap_err();
    assert_eq!(reason(&e), "NAMESPACE_NOT_FOUND");
    let as_key = |key: &str, ns: &str| server.connect.clone().api_key(key).namespace(ns);
    let in_blue = Client::connect_with(&as_key(&blue_client, "blue")).await.unwrap();
    in_blue
        .create_queue("blue-only", &QueueLimits::default())
        .await
        .unwrap();
    // Naming no namespace, a key with just one acts in it.
    let unnamed = Client::connect_with(&server.connect.clone().api_key(&blue_client))
        .await
        .unwrap();
    assert_eq!(unnamed.get_queue("blue-only").await.unwrap().name, "blue-only");
    // An admin key (every namespace) naming none acts in default, where that queue is not.
    assert_eq!(
        reason(&admin.get_queue("blue-only").await.unwrap_err()),
        "QUEUE_NOT_FOUND"
    );
    for ns in ["green", "default", "nowhere"] {
        let c = Client::connect_with(&as_key(&blue_client, ns)).await.unwrap();
        let e = c.list_queues().await.unwrap_err();
        assert_eq!(
            (e.code(), reason(&e)),
            (Some(Code::PermissionDenied), "PERMISSION_DENIED".into()),
            "{ns}"
        );
    }
    let hello = || RawWorker::hello_of("w-1", &["counted"]);
    let bearer = format!("Bearer {blue_worker}");
    let e = RawWorker::hello_with(
        &server.addr,
        hello(),
        &[("authorization", &bearer), ("waymark-namespace", "green")],
    )
    .await
    .err()
    .expect("refused");
    assert_eq!(e.code(), Code::PermissionDenied);
    RawWorker::hello_with(
        &server.addr,
        hello(),
        &[("authorization", &bearer), ("waymark-namespace", "blue")],
    )
    .await
    .expect("its own namespace");
}

// Attempt: an admin key of one namespace (billing) mints a `*` key, an admin key of another
// namespace, a key outside its namespace, a key that outlives it; lists and revokes keys of
// other namespaces; creates and deletes namespaces; an admin key made with no namespace. Then
// billing is deleted and made again. Outcome: PERMISSION_DENIED (API_KEY_NOT_FOUND for a key it
// does not manage, INVALID_ARGUMENT for the unnamed admin key); it sees and manages only
// billing's keys; once billing is deleted its keys are refused, also in the new billing, and a
// key of billing and shop keeps only shop.
async fn admin_keys_manage_only_their_namespaces_and_keys_die_with_theirs(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let ttl: Vec<String> = vec!["--key-cache-ttl".into(), "1s".into()];
    let (server, _, root) = waymark_integration_tests::keyed_server(&db, &ttl).await;
    for ns in ["billing", "shop", "other"] {
        root.create_namespace(ns).await.unwrap();
    }
    let spec = |role, ns: &[&str], expires_at_ms| ApiKeySpec {
        name: format!("{ns:?} key"),
        role,
        namespaces: ns.iter().map(|s| s.to_string()).collect(),
        name_patterns: vec![],
        expires_at_ms,
    };
    let e = root.create_api_key(&spec(Role::Admin, &[], None)).await.unwrap_err();
    assert_eq!(reason(&e), "INVALID_ARGUMENT", "an admin key names its namespaces");
    let (_, billing_admin_key) = root
        .create_api_key(&spec(Role::Admin, &["billing"], None))
        .await
        .unwrap();
    let (other_client, _) = root
        .create_api_key(&spec(Role::Client, &["other"], None))
        .await
        .unwrap();
    let (_, both_key) = root
        .create_api_key(&spec(Role::Client, &["billing", "shop"], None))
        .await
        .unwrap();
    let billing_admin = Client::connect_with(&server.connect.clone().api_key(&billing_admin_key))
        .await
        .unwrap();
    let denied = |e: waymark_sdk::Error| {
        assert_eq!(
            (e.code(), reason(&e)),
            (Some(Code::PermissionDenied), "PERMISSION_DENIED".into())
        )
    };
    for ns in [&["*"][..], &["other"], &["billing", "other"]] {
        denied(
            billing_admin
                .create_api_key(&spec(Role::Admin, ns, None))
                .await
                .unwrap_err(),
        );
        denied(
            billing_admin
                .create_api_key(&spec(Role::Reader, ns, None))
                .await
                .unwrap_err(),
        );
    }
    denied(billing_admin.create_namespace("mine").await.unwrap_err());
    denied(billing_admin.delete_namespace("other", true).await.unwrap_err());
    let e = billing_admin.revoke_api_key(&other_client.key_id).await.unwrap_err();
    assert_eq!(
        reason(&e),
        "API_KEY_NOT_FOUND",
        "a key it does not manage is not its to find"
    );
    // What it may do: keys inside billing, which it then sees and revokes.
    let (made, made_key) = billing_admin
        .create_api_key(&spec(Role::Client, &["billing"], None))
        .await
        .unwrap();
    let listed: Vec<String> = billing_admin
        .list_api_keys()
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.key_id)
        .collect();
    assert!(listed.contains(&made.key_id), "{listed:?}");
    assert!(!listed.contains(&other_client.key_id), "{listed:?}");
    assert_eq!(
        billing_admin
            .list_namespaces()
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.name)
            .collect::<Vec<_>>(),
        ["billing"]
    );
    assert_eq!(
        reason(&billing_admin.describe_namespace("other").await.unwrap_err()),
        "NAMESPACE_NOT_FOUND"
    );
    // A key made by a key that expires expires no later.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let soon = now_ms + 3_600_000;
    let (_, brief_admin_key) = root
        .create_api_key(&spec(Role::Admin, &["billing"], Some(soon)))
        .await
        .unwrap();
    let brief_admin = Client::connect_with(&server.connect.clone().api_key(&brief_admin_key))
        .await
        .unwrap();
    denied(
        brief_admin
            .create_api_key(&spec(Role::Client, &["billing"], Some(soon + 1)))
            .await
            .unwrap_err(),
    );
    let (inherited, _) = brief_admin
        .create_api_key(&spec(Role::Client, &["billing"], None))
        .await
        .unwrap();
    assert_eq!(inherited.expires_at_ms, Some(soon));

    // Billing goes: its keys with it. Made again, the new billing is not theirs.
    let in_billing = |key: &str| server.connect.clone().api_key(key).namespace("billing");
    let as_made = Client::connect_with(&in_billing(&made_key)).await.unwrap();
    as_made.list_queues().await.unwrap();
    root.delete_namespace("billing", true).await.unwrap();
    root.create_namespace("billing").await.unwrap();
    let e = as_made.list_queues().await.unwrap_err();
    assert_eq!(reason(&e), "UNAUTHENTICATED", "a key of billing alone is revoked");
    let e = billing_admin.list_api_keys().await.unwrap_err();
    assert_eq!(reason(&e), "UNAUTHENTICATED");
    let both_in_billing = Client::connect_with(&in_billing(&both_key)).await.unwrap();
    denied(both_in_billing.list_queues().await.unwrap_err());
    let both_in_shop = Client::connect_with(&server.connect.clone().api_key(&both_key).namespace("shop"))
        .await
        .unwrap();
    both_in_shop.list_queues().await.expect("the key keeps shop");
}

// Attempt: one namespace floods starts while another's client starts its own; worker streams
// past a namespace's own limit and past the server's cap (which every namespace shares); waits
// past a namespace's limit. The limits are set with `waymark namespace update`. Outcome: the
// flood is refused at its rate (NAMESPACE_START_RATE) and every start of the other namespace
// is answered; streams and waits past either limit are RESOURCE_EXHAUSTED.
async fn namespace_limits_and_server_caps_hold(backend: Backend) {
    let port = waymark_integration_tests::free_port();
    let listen = format!("127.0.0.1:{port}");
    let Some((_db, server)) = server(backend, &["--max-worker-streams", "3", "--metrics-listen", &listen]).await else {
        return;
    };
    let admin = server.client().await;
    for ns in ["noisy", "quiet"] {
        admin.create_namespace(ns).await.unwrap();
    }
    let out = std::process::Command::new(waymark_integration_tests::waymark_bin())
        .args([
            "namespace",
            "update",
            "noisy",
            "--start-rate",
            "20",
            "--max-worker-streams",
            "1",
        ])
        .args(["--max-waits", "1", "--json", "--server", &server.addr])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown[0]["limits"]["start_rate"], 20, "{shown}");
    let limits = admin.describe_namespace("noisy").await.unwrap().limits;
    assert_eq!(
        (limits.start_rate, limits.max_worker_streams, limits.max_waits),
        (Some(20), Some(1), Some(1))
    );

    let start = |ns: &'static str, id: String| {
        let server = &server;
        async move {
            let c = in_ns(server, ns).await;
            let options = StartOptions {
                allow_unregistered: true,
                ..StartOptions::id(id)
            };
            c.start_json("flooded", serde_json::json!({}), options).await
        }
    };
    let flood: Vec<_> = (0..8)
        .map(|t| {
            let connect = server.connect.clone().namespace("noisy");
            tokio::spawn(async move {
                let c = Client::connect_with(&connect).await.unwrap();
                let (mut started, mut refused) = (0, 0);
                for i in 0..100 {
                    let options = StartOptions {
                        allow_unregistered: true,
                        ..StartOptions::id(format!("flood-{t}-{i}"))
                    };
                    match c.start_json("flooded", serde_json::json!({}), options).await {
                        Ok(_) => started += 1,
                        Err(e) => {
                            assert_eq!(reason(&e), "NAMESPACE_START_RATE", "{e:?}");
                            refused += 1;
                        }
                    }
                }
                (started, refused)
            })
        })
        .collect();
    for i in 0..50 {
        start("quiet", format!("calm-{i}"))
            .await
            .expect("the other namespace is answered");
    }
    let (mut started, mut refused) = (0, 0);
    for f in flood {
        let (s, r) = f.await.unwrap();
        started += s;
        refused += r;
    }
    assert!(refused > 0 && started > 0, "started {started}, refused {refused}");

    // Worker streams: noisy may hold one; the server three in all.
    let hello = |id: &str, ns: &str| {
        let (addr, id, ns) = (server.addr.clone(), id.to_string(), ns.to_string());
        async move {
            RawWorker::hello_with(
                &addr,
                RawWorker::hello_of(&id, &["counted"]),
                &[("waymark-namespace", ns.as_str())],
            )
            .await
        }
    };
    let _n1 = hello("n1", "noisy").await.unwrap();
    let e = hello("n2", "noisy").await.err().expect("past noisy's own limit");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("noisy"), "{e:?}");
    let _q1 = hello("q1", "quiet").await.unwrap();
    let _d1 = hello("d1", "default").await.unwrap();
    let e = hello("q2", "quiet")
        .await
        .err()
        .expect("past the server's cap, shared by every namespace");
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("this server"), "{e:?}");

    // Waits: noisy may hold one. (Its start waits for the rate's next token.)
    let noisy = in_ns(&server, "noisy").await;
    wait_for("a start under noisy's rate", PATIENCE, || async {
        start("noisy", "held".into()).await.ok()
    })
    .await;
    let waiting = tokio::spawn({
        let noisy = noisy.clone();
        async move { noisy.await_workflow("held", Some(Duration::from_secs(3600))).await }
    });
    // Once the server holds that wait (its gauge says so), a second is refused.
    wait_for("noisy's one wait to be held", PATIENCE, || async {
        (waymark_integration_tests::waits_gauge(port, "noisy").await? == 1).then_some(())
    })
    .await;
    let refused = noisy
        .await_workflow("held", Some(Duration::from_millis(200)))
        .await
        .expect_err("past noisy's limit of waits");
    assert_eq!(refused.reason(), Some("TOO_MANY_WAITS"), "{refused:?}");
    assert!(refused.to_string().contains("noisy"), "{refused}");
    assert!(!waiting.is_finished(), "the first wait is still held");
    waiting.abort();
}

// Attempt: delete the default namespace; delete one holding unfinished work; force it; use it
// after; make it again. Outcome: NAMESPACE_PROTECTED; NAMESPACE_NOT_EMPTY; deleted (on every
// replica); NAMESPACE_NOT_FOUND; a new, empty namespace.
async fn deleting_a_namespace_drops_it_everywhere(backend: Backend) {
    let Some((db, a)) = server(backend, &[]).await else {
        return;
    };
    // A second replica where the store allows one.
    let b = if backend == Backend::Postgres {
        Some(ServerProcess::start(&db, &waymark_integration_tests::fast_recovery_args()).await)
    } else {
        None
    };
    let admin = a.client().await;
    assert_eq!(
        reason(&admin.delete_namespace("default", true).await.unwrap_err()),
        "NAMESPACE_PROTECTED"
    );
    admin.create_namespace("temp").await.unwrap();
    let temp = in_ns(&a, "temp").await;
    // A worker registers the name, then goes: the started workflow stays unfinished.
    let w = RawWorker::hello_with(
        &a.addr,
        RawWorker::hello_of("w", &["counted"]),
        &[("waymark-namespace", "temp")],
    )
    .await
    .unwrap();
    drop(w);
    temp.start_json("counted", serde_json::json!({"steps": 1}), StartOptions::id("left"))
        .await
        .unwrap();
    if let Some(b) = &b {
        // Made through A, used through B.
        let on_b = in_ns(b, "temp").await;
        assert_eq!(on_b.get("left").await.unwrap().workflow_id, "left");
    }
    assert!(admin.describe_namespace("temp").await.unwrap().has_unfinished_workflows == Some(true));
    assert_eq!(
        reason(&admin.delete_namespace("temp", false).await.unwrap_err()),
        "NAMESPACE_NOT_EMPTY"
    );
    // From a script, the CLI deletes nothing nobody confirmed; with --yes it does.
    let delete = |yes: bool| {
        let mut cmd = std::process::Command::new(waymark_integration_tests::waymark_bin());
        cmd.args(["namespace", "delete", "temp", "--force", "--server", &a.addr]);
        if yes {
            cmd.arg("--yes");
        }
        cmd.output().unwrap()
    };
    let refused = delete(false);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("--yes"), "{said}");
    assert_eq!(temp.get("left").await.unwrap().workflow_id, "left");
    let done = delete(true);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert_eq!(reason(&temp.get("left").await.unwrap_err()), "NAMESPACE_NOT_FOUND");
    if let Some(b) = &b {
        let on_b = in_ns(b, "temp").await;
        wait_for("the other replica to close the namespace", PATIENCE, || async {
            match on_b.get("left").await {
                Err(e) if e.reason() == Some("NAMESPACE_NOT_FOUND") => Some(()),
                _ => None,
            }
        })
        .await;
    }
    admin.create_namespace("temp").await.unwrap();
    assert_eq!(
        reason(&temp.get("left").await.unwrap_err()),
        "WORKFLOW_NOT_FOUND",
        "made again, empty"
    );
    assert_eq!(
        admin.describe_namespace("temp").await.unwrap().has_unfinished_workflows,
        Some(false)
    );
}

// Attempt: make more namespaces than the server holds. Outcome: RESOURCE_EXHAUSTED
// (TOO_MANY_NAMESPACES) past the cap, `default` counted; the ones made still work.
async fn namespaces_are_capped(backend: Backend) {
    let Some((_db, server)) = server(backend, &["--max-namespaces", "3"]).await else {
        return;
    };
    let admin = server.client().await;
    admin.create_namespace("one").await.unwrap();
    admin.create_namespace("two").await.unwrap();
    let e = admin.create_namespace("three").await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(Code::ResourceExhausted), "TOO_MANY_NAMESPACES".into())
    );
    in_ns(&server, "two").await.list_queues().await.unwrap();
    assert_eq!(admin.list_namespaces().await.unwrap().len(), 3);
}

waymark_integration_tests::on_both_stores!(
    namespaces_are_capped,
    two_namespaces_run_the_same_ids_without_crossing,
    keys_act_only_in_their_namespaces,
    admin_keys_manage_only_their_namespaces_and_keys_die_with_theirs,
    namespace_limits_and_server_caps_hold,
    deleting_a_namespace_drops_it_everywhere,
);
