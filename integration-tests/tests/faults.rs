//! Infrastructure faults are never a workflow's failure: a database restarted under load, a
//! database gone and back (health follows it), and a run a live worker lost without a word. The
//! server logs no panic and no error but store calls failed while the database was away.

use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
use waymark_integration_tests::{
    fast_recovery_args, free_port, http_get,
    log_check::DATABASE_GONE,
    on_both_stores,
    postgres_cluster::PostgresCluster,
    raw_worker::RawWorker,
    side_effects, wait_for,
    workload::{all_succeeded, check_exactly_once, enqueue_batch, start_batch, wait_for_effects, PATIENCE},
    Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_proto::v1::{self, reply, server_message, worker_message};
use waymark_sdk::{StartOptions, WorkflowStatus};

/// A PostgreSQL restart, fast and then immediate, while 200 workflows of 10 steps run on two
/// workers: every workflow succeeds with the right output, every recorded step ran once under
/// the epoch that recorded it, and nothing ends in ERROR (before this was fixed, workflows
/// failed with STORE_UNAVAILABLE).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_under_load_fails_no_workflow() {
    let Some(pg) = PostgresCluster::start() else { return };
    let db = pg.database();
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    // Queued before the workers connect, so the first restart comes under load.
    let ids = enqueue_batch(&client, "pg-restart", 200, 10, 50).await;
    let _a = WorkerProcess::start(&server.addr, &log, 20, "a");
    let _b = WorkerProcess::start(&server.addr, &log, 20, "b");
    wait_for_effects(&log, 300).await;
    pg.restart("fast");
    // On a fast machine the workload may be nearly done by now: the second restart still comes
    // before its last steps.
    let after_fast = side_effects::read(&log).len();
    wait_for_effects(&log, (after_fast + 300).min(1_900)).await;
    pg.restart("immediate");
    all_succeeded(&client, &ids, 10).await;
    // A step in flight at each restart may run again under a later epoch, once per restart at
    // most (a let-go run is redispatched and replays to it).
    check_exactly_once(&client, &ids, 10, &log, 2).await;
    // Store calls under way at each restart failed; nothing else is an error.
    server.assert_log_clean(DATABASE_GONE);
}

async fn health(addr: &str) -> Option<ServingStatus> {
    let channel = tonic::transport::Channel::from_shared(addr.to_string())
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut h = HealthClient::new(channel);
    let r = h
        .check(HealthCheckRequest {
            service: "waymark.v1.WorkflowService".into(),
        })
        .await
        .ok()?;
    ServingStatus::try_from(r.into_inner().status).ok()
}

/// While the database is down the server answers health NOT_SERVING and requests UNAVAILABLE
/// with the stable reason (never INTERNAL); when it is back, SERVING again without a restart,
/// and work goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_database_and_requests_say_unavailable() {
    let Some(pg) = PostgresCluster::start() else { return };
    let db = pg.database();
    let metrics = free_port();
    let mut flags = fast_recovery_args();
    flags.extend(["--metrics-listen".to_string(), format!("127.0.0.1:{metrics}")]);
    let server = ServerProcess::start(&db, &flags).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let _w = WorkerProcess::start(&server.addr, &log, 20, "w");
    let first = start_batch(&client, "before", 5, 2, 0).await;
    all_succeeded(&client, &first, 2).await;
    assert_eq!(health(&server.addr).await, Some(ServingStatus::Serving));
    assert_eq!(
        http_get(metrics, "/readyz").await.unwrap(),
        (200, "ready\n".to_string())
    );

    pg.stop("fast");
    wait_for("health NOT_SERVING", PATIENCE, || {
        let addr = server.addr.clone();
        async move { (health(&addr).await == Some(ServingStatus::NotServing)).then_some(()) }
    })
    .await;
    // The orchestrator's view: not ready, and why; alive all the same (a restart would not
    // bring the database back).
    let (code, why) = http_get(metrics, "/readyz").await.unwrap();
    assert_eq!(code, 503, "{why}");
    assert!(why.contains("the database does not answer"), "{why}");
    assert_eq!(http_get(metrics, "/healthz").await.unwrap().0, 200);
    // The same through `waymark health`, as a container's health check asks.
    let ask = |ready: bool| {
        let mut cmd = std::process::Command::new(waymark_integration_tests::waymark_bin());
        cmd.args(["health", "--metrics-listen", &format!("127.0.0.1:{metrics}")]);
        if ready {
            cmd.arg("--ready");
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, said) = ask(true);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("the database does not answer"), "{said}");
    assert_eq!(ask(false), (Some(0), "ok\n".to_string()));
    // Asked once, the server says why it cannot answer; a client that resends (the default)
    // gets its answer once the database is back.
    let once = client.clone().resend_for(std::time::Duration::ZERO);
    let refused = once.get(&first[0]).await.expect_err("the database is down");
    assert_eq!(refused.reason(), Some("STORE_UNAVAILABLE"), "{refused:?}");
    let patient = tokio::spawn({
        let (client, id) = (client.clone(), first[0].clone());
        async move { client.get(&id).await }
    });

    pg.start_again();
    let read = patient.await.unwrap().expect("answered once the database was back");
    assert_eq!(read.workflow_id, first[0]);
    wait_for("health SERVING again", PATIENCE, || {
        let addr = server.addr.clone();
        async move { (health(&addr).await == Some(ServingStatus::Serving)).then_some(()) }
    })
    .await;
    assert_eq!(http_get(metrics, "/readyz").await.unwrap().0, 200);
    let second = start_batch(&client, "after", 5, 2, 0).await;
    all_succeeded(&client, &second, 2).await;
    // Store calls while the database was stopped failed; nothing else is an error.
    server.assert_log_clean(DATABASE_GONE);
}

/// A worker that stays connected and heartbeats but lost a run (its task died, a reply went
/// missing) must not leave the workflow PENDING for good: its heartbeat no longer lists it, and
/// the server puts it back in its queue (counted as a recovery), to be dispatched again.
async fn a_run_a_live_worker_lost_is_dispatched_again(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let mut w = RawWorker::connect(&server.addr, "raw-forgetful", &["lossy"]).await;
    w.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 }))
        .await;
    client
        .start_json("lossy", serde_json::json!({}), StartOptions::id("lost-1"))
        .await
        .expect("start");
    let first = w.next_dispatch().await;
    assert_eq!((first.workflow_id.as_str(), first.epoch), ("lost-1", 1));

    // The worker loses the run without a word, gives its slot back and heartbeats on.
    w.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 }))
        .await;
    w.send(worker_message::Kind::Heartbeat(v1::Heartbeat {
        reports_held: true,
        held_workflow_ids: vec![],
        dispatches_received: 1,
    }))
    .await;
    let again = w.next_dispatch().await;
    assert_eq!(again.workflow_id, "lost-1");
    assert!(
        again.epoch > first.epoch,
        "dispatched anew under a new epoch: {again:?}"
    );
    assert_eq!(again.recovery_attempts, 1, "taking it back counts as a recovery");

    // This time it finishes; the stale epoch could not have.
    let id = w
        .send(worker_message::Kind::CompleteWorkflow(v1::CompleteWorkflow {
            workflow_id: "lost-1".into(),
            epoch: again.epoch,
            outcome: Some(v1::complete_workflow::Outcome::Output(waymark_proto::json::to_payload(
                &serde_json::json!("found"),
            ))),
            steps: vec![],
        }))
        .await;
    loop {
        if let server_message::Kind::Reply(r) = w.next().await {
            if r.request_id == id {
                assert!(matches!(r.result, Some(reply::Result::WorkflowCompleted(_))), "{r:?}");
                break;
            }
        }
    }
    let done = client.await_workflow("lost-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(done.output, Some(serde_json::json!("found")));
    server.assert_log_clean(&[]);
}

on_both_stores!(a_run_a_live_worker_lost_is_dispatched_again);
