//! Worker keys: what their patterns let a worker register and reach, worker ids bound to their
//! key, remote-step results fenced to the stream their attempt went to.

use tonic::Code;
use waymark_integration_tests::{raw_worker::RawWorker, wait_for, Backend, ServerProcess};
use waymark_proto::v1::{self, reply, server_message, worker_message};
use waymark_sdk::{ConnectOptions, Role, StartOptions};

use super::*;

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

waymark_integration_tests::on_both_stores!(
    workers_need_a_worker_key_that_covers_their_names,
    a_worker_id_cannot_be_taken_by_another_key,
    a_remote_steps_result_comes_only_from_the_stream_it_was_dispatched_to,
    a_worker_key_reaches_only_the_workflows_its_patterns_cover,
);
