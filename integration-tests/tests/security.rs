//! Security end to end, with real server and worker processes on both stores: API keys and their
//! roles, admin scope, revocation reaching open streams and long polls, worker keys limited to
//! what their patterns cover, worker ids bound to their key, remote-step results fenced to their
//! stream, the audit trail, the metrics door, what the unauthenticated may cost, and the
//! server's refusal to listen beyond loopback unprotected. TLS is `tls.rs`.
//!
//! Each test names the attempt it makes and the outcome it expects; together they are the
//! threat list docs/operators/secure.md summarizes.

use std::time::Duration;

use tonic::Code;
use waymark_integration_tests::{
    raw_worker::RawWorker, wait_for, wait_for_registration, waymark_bin, Backend, ServerProcess, TestDatabase,
    WorkerProcess,
};
use waymark_proto::v1::{self, reply, server_message, worker_message};
use waymark_sdk::{ApiKeySpec, Client, ConnectOptions, Role, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn reason(e: &waymark_sdk::Error) -> (Option<Code>, String) {
    (e.code(), e.reason().unwrap_or_default().to_string())
}

/// A server with --auth and its first admin key; the client holds that key.
async fn with_auth(backend: Backend, extra: &[&str]) -> Option<(TestDatabase, ServerProcess, String)> {
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

async fn client_with(server: &ServerProcess, key: &str) -> Client {
    Client::connect_with(&server.connect.clone().api_key(key))
        .await
        .unwrap()
}

async fn make_key(admin: &Client, role: Role, patterns: &[&str]) -> (String, String) {
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

fn worker_with_key(server: &ServerProcess, db: &TestDatabase, name: &str, key: &str) -> WorkerProcess {
    WorkerProcess::start_with_env(
        &server.addr,
        &db.dir.join("effects.log"),
        10,
        name,
        &[("WAYMARK_API_KEY", key)],
    )
}

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

// Attempt: connect a worker with a client key, and with a worker key whose patterns do not
// cover the names it registers. Outcome: both refused with PERMISSION_DENIED; the SDK worker
// stops with that error instead of retrying.
async fn workers_need_a_worker_key_that_covers_their_names(backend: Backend) {
    let Some((db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, client_key) = make_key(&admin, Role::Client, &[]).await;
    let (_, narrow_key) = make_key(&admin, Role::Worker, &["billing.*"]).await;
    let (_, broad_key) = make_key(&admin, Role::Worker, &["count*", "billing.*"]).await;
    for (name, key) in [("with-client-key", &client_key), ("with-narrow-key", &narrow_key)] {
        let mut w = worker_with_key(&server, &db, name, key);
        let status = w.wait_exit(PATIENCE).await;
        assert_eq!(status, Some(1), "{name} stops");
        assert!(w.log_text().contains("PERMISSION_DENIED"), "{name}: {}", w.log_text());
    }
    let hello = RawWorker::hello_of("raw-billing", &["billing.charge"]);
    RawWorker::hello_with_key(&server.addr, hello, Some(&narrow_key))
        .await
        .expect("a name its patterns cover");
    let hello = RawWorker::hello_of("raw-counted", &["counted"]);
    RawWorker::hello_with_key(&server.addr, hello, Some(&broad_key))
        .await
        .expect("count* covers counted");
}

// Attempt: a second stream, with another key, says hello with the id of a live worker, on the
// same replica and (PostgreSQL) on another. Outcome: WORKER_ID_IN_USE; the holder keeps its
// id, and its own reconnect (same key) is let in — elsewhere at once, here once the old stream
// goes quiet. (That another key is refused even once the holder is
// quiet is decided by the same check, tested with a manual clock in the engine's tests.)
async fn a_worker_id_cannot_be_taken_by_another_key(backend: Backend) {
    // A lease long enough that the held stream stays live through the checks below.
    let Some((db, server, admin_key)) = with_auth(backend, &["--worker-lease", "60s"]).await else {
        return;
    };
    // On PostgreSQL, a second replica: the binding holds across replicas too.
    let other = if backend == Backend::Postgres {
        let args: Vec<String> = ["--auth", "--worker-lease", "60s"].map(String::from).to_vec();
        Some(ServerProcess::start_secured(&db, &args, false, ConnectOptions::from_env()).await)
    } else {
        None
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, mine) = make_key(&admin, Role::Worker, &[]).await;
    let (_, theirs) = make_key(&admin, Role::Worker, &[]).await;
    let hello = || RawWorker::hello_of("payments-1", &["counted"]);
    let _held = RawWorker::hello_with_key(&server.addr, hello(), Some(&mine))
        .await
        .unwrap();
    let mut replicas = vec![&server];
    replicas.extend(other.as_ref());
    for replica in replicas {
        let e = RawWorker::hello_with_key(&replica.addr, hello(), Some(&theirs))
            .await
            .err()
            .expect("refused");
        assert_eq!(e.code(), Code::AlreadyExists);
        assert!(format!("{e:?}").contains("WORKER_ID_IN_USE"), "{e:?}");
    }
    if let Some(b) = &other {
        // The owner's own reconnect through the other replica is let in at once.
        RawWorker::hello_with_key(&b.addr, hello(), Some(&mine))
            .await
            .expect("the same key, elsewhere");
    }
    // The raw stream sends no heartbeats: it goes quiet, and the owner's reconnect replaces it.
    wait_for("the owner to take its id back", PATIENCE, || async {
        RawWorker::hello_with_key(&server.addr, hello(), Some(&mine)).await.ok()
    })
    .await;
}

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

/// A raw worker stream under `key` registering `workflows` and remote `steps`, with credits.
async fn raw_with_key(server: &ServerProcess, id: &str, workflows: &[&str], steps: &[&str], key: &str) -> RawWorker {
    let mut hello = RawWorker::hello_of(id, workflows);
    hello.step_names = steps.iter().map(|s| s.to_string()).collect();
    let mut w = RawWorker::hello_with_key(&server.addr, hello, Some(key)).await.unwrap();
    w.send(worker_message::Kind::Credit(v1::Credit { workflows: 5, steps: 5 }))
        .await;
    w
}

fn step_result(workflow_id: &str, step_id: u32, attempt: u32, output: serde_json::Value) -> worker_message::Kind {
    worker_message::Kind::StepResult(v1::StepResult {
        workflow_id: workflow_id.into(),
        step_id,
        attempt,
        outcome: Some(v1::step_result::Outcome::Output(waymark_proto::json::to_payload(
            &output,
        ))),
    })
}

fn refused(r: reply::Result) -> String {
    match r {
        reply::Result::Error(e) => e.reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// Attempt: a remote step's attempt is dispatched to one worker stream; another key's stream,
// whose patterns do not cover the step, answers it, then a stream of a key that does cover it
// and registered the step too. Outcome: PERMISSION_DENIED, then STEP_ATTEMPT_STALE, nothing
// recorded; the stream the attempt went to is answered and its value is the step's result.
async fn a_remote_steps_result_comes_only_from_the_stream_it_was_dispatched_to(backend: Backend) {
    let Some((_db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, caller_key) = make_key(&admin, Role::Worker, &["pay.*"]).await;
    let (_, runner_key) = make_key(&admin, Role::Worker, &["pay.*"]).await;
    let (_, intruder_key) = make_key(&admin, Role::Worker, &["intruder.*"]).await;
    let (_, client_key) = make_key(&admin, Role::Client, &[]).await;
    let client = client_with(&server, &client_key).await;
    let mut caller = raw_with_key(&server, "caller", &["pay.flow"], &[], &caller_key).await;
    client
        .start_json("pay.flow", serde_json::json!({}), StartOptions::id("order-1"))
        .await
        .unwrap();
    let d = caller.next_dispatch().await;
    let call = caller
        .request(worker_message::Kind::CallStep(v1::CallStep {
            workflow_id: "order-1".into(),
            epoch: d.epoch,
            step_id: 0,
            step_name: "pay.charge".into(),
            input: Some(waymark_proto::json::to_payload(&serde_json::json!(10))),
            ..Default::default()
        }))
        .await;
    assert!(matches!(call, reply::Result::CallResult(_)), "{call:?}");
    let mut runner = raw_with_key(&server, "runner", &[], &["pay.charge"], &runner_key).await;
    let attempt = loop {
        if let server_message::Kind::DispatchStep(t) = runner.next().await {
            break t;
        }
    };
    assert_eq!((attempt.workflow_id.as_str(), attempt.attempt), ("order-1", 1));
    // Connected only now: the attempt is the runner's already, so nothing is dispatched here.
    let mut intruder = raw_with_key(&server, "intruder", &["intruder.x"], &[], &intruder_key).await;
    let mut rival = raw_with_key(&server, "rival", &[], &["pay.charge"], &runner_key).await;
    let forged = serde_json::json!("forged");
    assert_eq!(
        refused(intruder.request(step_result("order-1", 0, 1, forged.clone())).await),
        "PERMISSION_DENIED"
    );
    for n in [0, 1, 2] {
        assert_eq!(
            refused(rival.request(step_result("order-1", 0, n, forged.clone())).await),
            "STEP_ATTEMPT_STALE",
            "attempt {n} from a stream it was not dispatched to"
        );
    }
    assert!(
        client.steps("order-1").await.unwrap().is_empty(),
        "nothing forged was recorded"
    );
    let ok = runner
        .request(step_result("order-1", 0, 1, serde_json::json!(20)))
        .await;
    assert!(matches!(ok, reply::Result::StepRecorded(_)), "{ok:?}");
    let steps = client.steps("order-1").await.unwrap();
    assert_eq!((steps.len(), steps[0].output.clone()), (1, Some(serde_json::json!(20))));
}

// Attempt: a worker whose key covers `intruder.*` and which holds one of its own workflows
// reads an event of a `pay.flow` workflow, sends to it, awaits it, selects on it, starts a
// `pay.flow` child; says hello with a queue its key does not name. Outcome: PERMISSION_DENIED
// each time and nothing written or created; the same requests aimed at a workflow its key
// covers are answered.
async fn a_worker_key_reaches_only_the_workflows_its_patterns_cover(backend: Backend) {
    let Some((_db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (_, pay_key) = make_key(&admin, Role::Worker, &["pay.*"]).await;
    let (_, intruder_key) = make_key(&admin, Role::Worker, &["intruder.*"]).await;
    let (_, client_key) = make_key(&admin, Role::Client, &[]).await;
    let client = client_with(&server, &client_key).await;
    // The victim's worker registers its name and takes nothing: the victim stays enqueued.
    let mut hello = RawWorker::hello_of("pay-worker", &["pay.flow"]);
    hello.queues = vec!["pay.queue".into()];
    let _pay = RawWorker::hello_with_key(&server.addr, hello, Some(&pay_key))
        .await
        .unwrap();
    client
        .start_json(
            "pay.flow",
            serde_json::json!({}),
            StartOptions {
                queue: Some("pay.queue".into()),
                ..StartOptions::id("victim")
            },
        )
        .await
        .unwrap();
    let mut intruder = raw_with_key(&server, "intruder", &["intruder.x"], &[], &intruder_key).await;
    client
        .start_json("intruder.x", serde_json::json!({}), StartOptions::id("mine"))
        .await
        .unwrap();
    client
        .start_json("intruder.x", serde_json::json!({}), StartOptions::id("sibling"))
        .await
        .unwrap();
    let mut epochs = std::collections::HashMap::new();
    while epochs.len() < 2 {
        let d = intruder.next_dispatch().await;
        epochs.insert(d.workflow_id.clone(), d.epoch);
    }
    let epoch = epochs["mine"];
    let payload = |v: serde_json::Value| Some(waymark_proto::json::to_payload(&v));
    let asks = |target: &str, step_id: u32| {
        vec![
            worker_message::Kind::GetEvent(v1::GetEventStep {
                workflow_id: "mine".into(),
                epoch,
                step_id,
                target_workflow_id: target.into(),
                key: "secret".into(),
                deadline_ms: 0,
            }),
            worker_message::Kind::SendMessage(v1::SendMessageStep {
                workflow_id: "mine".into(),
                epoch,
                step_id: step_id + 1,
                destination_id: target.into(),
                topic: "t".into(),
                message: payload(serde_json::json!("hi")),
            }),
            worker_message::Kind::AwaitChild(v1::AwaitChild {
                workflow_id: "mine".into(),
                epoch,
                step_id: step_id + 2,
                child_workflow_id: target.into(),
            }),
            worker_message::Kind::Select(v1::Select {
                workflow_id: "mine".into(),
                epoch,
                step_id: step_id + 3,
                targets: vec![v1::WaitTarget {
                    target: Some(v1::wait_target::Target::WorkflowId(target.into())),
                }],
                all: false,
            }),
        ]
    };
    for ask in asks("victim", 0) {
        let what = format!("{ask:?}");
        assert_eq!(refused(intruder.request(ask).await), "PERMISSION_DENIED", "{what}");
    }
    let child = |name: &str, step_id: u32| {
        worker_message::Kind::StartChild(v1::StartChild {
            workflow_id: "mine".into(),
            epoch,
            step_id,
            workflow_name: name.into(),
            input: payload(serde_json::json!({})),
            ..Default::default()
        })
    };
    assert_eq!(
        refused(intruder.request(child("pay.flow", 4)).await),
        "PERMISSION_DENIED"
    );
    assert!(client.steps("mine").await.unwrap().is_empty(), "nothing recorded");
    assert!(client.messages("victim").await.unwrap().is_empty(), "nothing sent");
    // The same requests, aimed at a workflow the key covers, are answered.
    for ask in asks("sibling", 10) {
        let what = format!("{ask:?}");
        let answer = intruder.request(ask).await;
        assert!(!matches!(answer, reply::Result::Error(_)), "{what}: {answer:?}");
    }
    let started = intruder.request(child("intruder.x", 14)).await;
    assert!(matches!(started, reply::Result::ChildStarted(_)), "{started:?}");
    // A hello with a queue outside the key is refused, and the queue is not made.
    let mut hello = RawWorker::hello_of("intruder-2", &["intruder.x"]);
    hello.queues = vec!["stolen".into()];
    let e = RawWorker::hello_with_key(&server.addr, hello, Some(&intruder_key))
        .await
        .err()
        .expect("refused");
    assert_eq!(e.code(), Code::PermissionDenied);
    let queues: Vec<String> = client
        .list_queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert!(!queues.contains(&"stolen".to_string()), "{queues:?}");
    let mut hello = RawWorker::hello_of("intruder-3", &["intruder.x"]);
    hello.queues = vec!["intruder.jobs".into(), "default".into()];
    RawWorker::hello_with_key(&server.addr, hello, Some(&intruder_key))
        .await
        .expect("a queue its key names");
}

// Attempt: a client cancels a workflow, a reader tries to, a made-up key tries to, an admin
// makes and revokes a key. Outcome: one `waymark::audit` line each, with the key id, the
// namespace, the method, the resource and the outcome; reads leave none; no secret anywhere in
// the log.
async fn writes_and_refusals_leave_an_audit_line(backend: Backend) {
    let Some((db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (client_id, client_key) = make_key(&admin, Role::Client, &[]).await;
    let (reader_id, reader_key) = make_key(&admin, Role::Reader, &[]).await;
    let (worker_id, worker_key) = make_key(&admin, Role::Worker, &[]).await;
    let _worker = worker_with_key(&server, &db, "w", &worker_key);
    let client = client_with(&server, &client_key).await;
    wait_for_registration(&client, "counted").await;
    client
        .start_json(
            "counted",
            serde_json::json!({"steps": 1}),
            StartOptions::id("audited-1"),
        )
        .await
        .unwrap();
    client.await_workflow("audited-1", Some(PATIENCE)).await.unwrap();
    let reader = client_with(&server, &reader_key).await;
    reader.get("audited-1").await.unwrap();
    reader.cancel("audited-1").await.unwrap_err();
    let fake = format!("wmk_{}_{}", "0".repeat(16), "0".repeat(64));
    client_with(&server, &fake).await.cancel("audited-1").await.unwrap_err();
    let admin_id = admin
        .list_api_keys()
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.name == "bootstrap admin")
        .unwrap()
        .key_id;
    assert!(admin.revoke_api_key(&reader_id).await.unwrap());
    let audit = |needles: Vec<String>| {
        let log = std::fs::read_to_string(&server.log).unwrap_or_default();
        log.lines()
            .find(|l| l.contains("waymark::audit") && needles.iter().all(|n| l.contains(n.as_str())))
            .map(str::to_string)
    };
    let expect = |needles: &[&str]| {
        let needles: Vec<String> = needles.iter().map(|s| s.to_string()).collect();
        async move {
            wait_for(&format!("the audit line with {needles:?}"), PATIENCE, || async {
                audit(needles.clone())
            })
            .await
        }
    };
    expect(&[
        &format!("key_id=\"{client_id}\""),
        "WorkflowService/StartWorkflow",
        "resource=\"audited-1\"",
        "outcome=Ok",
        "namespace=\"default\"",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{reader_id}\""),
        "WorkflowService/CancelWorkflow",
        "outcome=PermissionDenied",
    ])
    .await;
    expect(&[
        "key_id=\"-\"",
        "WorkflowService/CancelWorkflow",
        "outcome=Unauthenticated",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{admin_id}\""),
        "AdminService/RevokeApiKey",
        &format!("resource=\"{reader_id}\""),
        "outcome=Ok",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{admin_id}\""),
        "AdminService/CreateApiKey",
        &format!("resource=\"{worker_id}\""),
    ])
    .await;
    expect(&[
        &format!("key_id=\"{worker_id}\""),
        "WorkerService/Connect",
        "outcome=Ok",
    ])
    .await;
    let log = std::fs::read_to_string(&server.log).unwrap();
    let read = log
        .lines()
        .find(|l| l.contains("waymark::audit") && l.contains("GetWorkflow") && l.contains("outcome=Ok"));
    assert_eq!(read, None, "reads let in are not audited");
    for key in [&admin_key, &client_key, &reader_key, &worker_key] {
        let secret = key.rsplit('_').next().unwrap();
        assert!(!log.contains(secret), "a secret in the log");
    }
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

// Attempt: 64 clients send well-formed made-up keys as fast as they are answered while a real
// client works. Outcome: every made-up call is UNAUTHENTICATED and every real call is answered.
// (How much the flood slows the real client is measured by `make bench`, not asserted here.)
async fn a_flood_of_made_up_keys_leaves_real_calls_answered(backend: Backend) {
    let Some((_db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let real = client_with(&server, &admin_key).await;
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

waymark_integration_tests::on_both_stores!(
    an_admin_key_made_elsewhere_is_registered_from_its_file,
    calls_without_a_valid_key_are_unauthenticated,
    roles_allow_only_what_they_name,
    workers_need_a_worker_key_that_covers_their_names,
    a_worker_id_cannot_be_taken_by_another_key,
    revoking_a_key_closes_its_streams,
    an_expired_key_stops_working,
    a_remote_steps_result_comes_only_from_the_stream_it_was_dispatched_to,
    a_worker_key_reaches_only_the_workflows_its_patterns_cover,
    writes_and_refusals_leave_an_audit_line,
    revoking_a_key_ends_its_long_polls,
    metrics_beyond_loopback_need_a_key,
    unauthenticated_streams_are_capped_per_address,
    a_flood_of_made_up_keys_leaves_real_calls_answered,
);
