//! Engine decisions, tested in-process: a real SQLite store in a temp file, a manual clock, and
//! sessions whose streams are plain channels. No network, no waiting on time.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use waymark_store::{sqlite::SqliteStore, Fence, NewStep, Outcome, WorkflowStatus};

use super::*;
use crate::engine::workflows::StartRequest;

const T0: i64 = 1_700_000_000_000;

async fn engine() -> (Arc<Engine>, ManualClock) {
    let path = std::env::temp_dir().join(format!("waymark-engine-{}.db", uuid::Uuid::new_v4().simple()));
    engine_on(&path).await
}

/// An engine on the database file at `path`: two of them on one file are two replicas.
async fn engine_on(path: &std::path::Path) -> (Arc<Engine>, ManualClock) {
    let store = SqliteStore::open(&format!("sqlite:{}", path.display())).await.unwrap();
    let clock = ManualClock::new(T0);
    let config = EngineConfig {
        worker_lease: Duration::from_secs(10),
        recovery_grace: Duration::from_secs(2),
        max_recovery_attempts: 2,
        ..Default::default()
    };
    (Engine::new(Arc::new(store), Arc::new(clock.clone()), config), clock)
}

fn registration(worker_id: &str) -> Registration {
    Registration {
        worker_id: worker_id.into(),
        app_version: "v1".into(),
        workflow_names: vec!["wf".into()],
        step_names: vec!["double".into()],
        queues: vec![],
        key_id: None,
        name_patterns: Vec::new(),
        ..Default::default()
    }
}

async fn attach(engine: &Engine, worker_id: &str, credits: u32) -> (Arc<WorkerSession>, mpsc::Receiver<ToWorker>) {
    let (tx, rx) = mpsc::channel(100);
    let s = engine.workers.attach_worker(registration(worker_id), tx).await.unwrap();
    engine.workers.grant_credits(&s, credits, 0);
    (s, rx)
}

pub(super) async fn start(engine: &Engine, id: &str) {
    engine
        .workflows
        .start_workflow(StartRequest {
            workflow_name: "wf".into(),
            workflow_id: id.into(),
            input: "1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
}

fn dispatched(rx: &mut mpsc::Receiver<ToWorker>) -> Vec<waymark_store::ClaimedWorkflow> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        if let ToWorker::Dispatch(w) = m {
            out.push(*w);
        }
    }
    out
}

#[tokio::test]
async fn unknown_workflow_names_are_refused_until_a_worker_registers_them() {
    let (engine, _) = engine().await;
    let e = engine
        .workflows
        .start_workflow(StartRequest {
            workflow_name: "wf".into(),
            input: "1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (ErrorCode::NotFound, "WORKFLOW_NAME_UNKNOWN"));
    let _s = attach(&engine, "w1", 0).await;
    start(&engine, "a").await;
}

#[tokio::test]
async fn dispatch_never_exceeds_credits() {
    let (engine, _) = engine().await;
    let (session, mut rx) = attach(&engine, "w1", 2).await;
    for i in 0..5 {
        start(&engine, &format!("wf-{i}")).await;
    }
    dispatch::dispatch_once(&engine).await;
    dispatch::dispatch_once(&engine).await;
    let got = dispatched(&mut rx);
    assert_eq!(
        got.iter().map(|w| w.workflow.workflow_id.as_str()).collect::<Vec<_>>(),
        ["wf-0", "wf-1"]
    );
    assert_eq!(session.credits(), 0);
    engine.workers.grant_credits(&session, 1, 0);
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx).len(), 1);
}

/// Returned credits are no reason to ask the database for work; news that work may have been
/// enqueued is (here the dispatcher's poll, which stands for what another replica did without
/// telling this one).
#[tokio::test]
async fn credits_alone_do_not_claim_news_of_enqueued_work_does() {
    let path = std::env::temp_dir().join(format!("waymark-engine-{}.db", uuid::Uuid::new_v4().simple()));
    let (here, _) = engine_on(&path).await;
    let (elsewhere, _) = engine_on(&path).await;
    let (session, mut rx) = attach(&here, "w1", 1).await;
    // The first pass claims (a new worker may have work waiting) and finds nothing.
    dispatch::dispatch_once(&here).await;
    assert!(dispatched(&mut rx).is_empty());
    // Enqueued through the other replica, which has no worker; this one is not told.
    start(&elsewhere, "quiet").await;
    here.workers.grant_credits(&session, 1, 0);
    dispatch::dispatch_once(&here).await;
    assert!(dispatched(&mut rx).is_empty(), "credits alone claimed");
    here.core.work_enqueued();
    dispatch::dispatch_once(&here).await;
    assert_eq!(
        dispatched(&mut rx)
            .iter()
            .map(|w| w.workflow.workflow_id.as_str())
            .collect::<Vec<_>>(),
        ["quiet"]
    );
}

#[tokio::test]
async fn a_silent_worker_gets_nothing_new() {
    let (engine, clock) = engine().await;
    let (_session, mut rx) = attach(&engine, "w1", 5).await;
    clock.advance(11_000);
    start(&engine, "a").await;
    dispatch::dispatch_once(&engine).await;
    assert!(dispatched(&mut rx).is_empty());
}

#[tokio::test]
async fn detached_worker_loses_its_workflows_after_the_grace_period_and_the_next_dispatch_replays() {
    let (engine, clock) = engine().await;
    let (a, mut a_rx) = attach(&engine, "a", 1).await;
    start(&engine, "wf-1").await;
    dispatch::dispatch_once(&engine).await;
    let first = dispatched(&mut a_rx).remove(0);
    assert_eq!(first.workflow.epoch, 1);
    let fence = Fence {
        workflow_id: "wf-1".into(),
        epoch: 1,
    };
    let step = NewStep {
        step_id: 0,
        name: "s".into(),
        outcome: Outcome::Output("7".into()),
        attempts: 1,
        started_at: None,
    };
    engine.workers.record_step(&a, fence.clone(), step).await.unwrap();
    engine.workers.detach_worker(&a).await;

    // Within the grace period nothing moves.
    clock.advance(1_000);
    recovery::recover_once(&engine).await;
    assert_eq!(
        engine.workflows.get_workflow("wf-1").await.unwrap().status,
        WorkflowStatus::Pending
    );

    clock.advance(1_500);
    recovery::recover_once(&engine).await;
    let w = engine.workflows.get_workflow("wf-1").await.unwrap();
    assert_eq!((w.status, w.recovery_attempts), (WorkflowStatus::Enqueued, 1));

    let (_b, mut b_rx) = attach(&engine, "b", 1).await;
    dispatch::dispatch_once(&engine).await;
    let again = dispatched(&mut b_rx).remove(0);
    assert_eq!(again.workflow.epoch, 2);
    assert_eq!(again.steps.len(), 1, "the replay carries the recorded step");

    // The first owner's writes are refused from now on.
    let late = NewStep {
        step_id: 1,
        name: "t".into(),
        outcome: Outcome::Output("8".into()),
        attempts: 1,
        started_at: None,
    };
    assert_eq!(
        engine.workers.record_step(&a, fence, late).await.unwrap_err().reason,
        "STALE_EPOCH"
    );
}

#[tokio::test]
async fn recovered_too_often_is_dead_lettered() {
    let (engine, clock) = engine().await;
    start_with_worker(&engine, "wf-1").await;
    for round in 1..=3 {
        let (s, mut rx) = attach(&engine, &format!("w{round}"), 1).await;
        dispatch::dispatch_once(&engine).await;
        assert_eq!(dispatched(&mut rx).len(), 1, "round {round}");
        engine.workers.detach_worker(&s).await;
        clock.advance(3_000);
        recovery::recover_once(&engine).await;
    }
    let w = engine.workflows.get_workflow("wf-1").await.unwrap();
    assert_eq!(
        (w.status, w.recovery_attempts),
        (WorkflowStatus::MaxRecoveryAttemptsExceeded, 3)
    );
    let resumed = engine.workflows.resume_workflow("wf-1").await.unwrap();
    assert_eq!(
        (resumed.status, resumed.recovery_attempts),
        (WorkflowStatus::Enqueued, 0)
    );
}

async fn start_with_worker(engine: &Engine, id: &str) {
    let (s, _rx) = attach(engine, "registrar", 0).await;
    start(engine, id).await;
    engine.workers.detach_worker(&s).await;
}

#[tokio::test]
async fn a_different_step_at_a_recorded_position_fails_the_workflow() {
    let (engine, _) = engine().await;
    let (s, mut rx) = attach(&engine, "w", 1).await;
    start(&engine, "wf-1").await;
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx).len(), 1);
    let fence = Fence {
        workflow_id: "wf-1".into(),
        epoch: 1,
    };
    let step = |name: &str| NewStep {
        step_id: 0,
        name: name.into(),
        outcome: Outcome::Output("1".into()),
        attempts: 1,
        started_at: None,
    };
    engine
        .workers
        .record_step(&s, fence.clone(), step("charge"))
        .await
        .unwrap();
    let e = engine.workers.record_step(&s, fence, step("refund")).await.unwrap_err();
    assert_eq!(e.reason, "NON_DETERMINISM");
    let w = engine.workflows.get_workflow("wf-1").await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Error);
    match w.outcome {
        Some(Outcome::Failure(f)) => assert_eq!(f.kind, "NonDeterminism"),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn cancel_tells_the_worker_and_later_writes_are_refused() {
    let (engine, _) = engine().await;
    let (s, mut rx) = attach(&engine, "w", 1).await;
    start(&engine, "wf-1").await;
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx).len(), 1);
    let w = engine.workflows.cancel_workflow("wf-1").await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Cancelled);
    assert!(matches!(rx.try_recv(), Ok(ToWorker::Cancel(id)) if id == "wf-1"));
    let step = NewStep {
        step_id: 0,
        name: "s".into(),
        outcome: Outcome::Output("1".into()),
        attempts: 1,
        started_at: None,
    };
    let e = engine
        .workers
        .record_step(
            &s,
            Fence {
                workflow_id: "wf-1".into(),
                epoch: 1,
            },
            step,
        )
        .await
        .unwrap_err();
    assert_eq!(e.reason, "WORKFLOW_NOT_RUNNING");
}

#[tokio::test]
async fn oversized_and_malformed_requests_are_refused() {
    let (engine, _) = engine().await;
    let _s = attach(&engine, "w", 0).await;
    let big = format!("\"{}\"", "x".repeat(engine.config().max_payload_bytes));
    let e = engine
        .workflows
        .start_workflow(StartRequest {
            workflow_name: "wf".into(),
            input: big,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "PAYLOAD_TOO_LARGE"));
    let e = engine.workflows.get_workflow("").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = engine.workflows.get_workflow(&"x".repeat(300)).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = engine
        .workflows
        .list_workflows(workflows::ListRequest {
            page_size: -1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument);
    let e = engine
        .workflows
        .list_workflows(workflows::ListRequest {
            page_token: "%%".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.reason, "INVALID_PAGE_TOKEN");
}

#[tokio::test]
async fn a_start_goes_straight_to_a_worker_with_room_unless_work_is_queued() {
    let (engine, clock) = engine().await;
    let (session, mut rx) = attach(&engine, "w1", 1).await;
    start(&engine, "first").await;
    // Dispatched by the start itself: no dispatcher pass needed.
    let got = dispatched(&mut rx);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].workflow.workflow_id.as_str(), got[0].workflow.epoch),
        ("first", 1)
    );
    assert_eq!(
        engine.workflows.get_workflow("first").await.unwrap().status,
        WorkflowStatus::Pending
    );
    assert_eq!(session.credits(), 0);
    // No room: the next start waits in the queue, and a full claim marks a backlog.
    clock.advance(1);
    start(&engine, "second").await;
    clock.advance(1);
    start(&engine, "third").await;
    assert!(dispatched(&mut rx).is_empty());
    engine.workers.grant_credits(&session, 1, 0);
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx)[0].workflow.workflow_id, "second");
    // With work queued, a new start does not jump ahead even when a credit is free.
    engine.workers.grant_credits(&session, 1, 0);
    clock.advance(1);
    start(&engine, "fourth").await;
    assert!(dispatched(&mut rx).is_empty());
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx)[0].workflow.workflow_id, "third");
}

/// A claim whose commit landed but whose answer was lost (the database went away between)
/// leaves workflows PENDING for a live worker that was never sent them, and its heartbeats
/// keep them from recovery. The failure puts the stream in doubt; the next pass gives back
/// what the stream was not sent, and dispatches it anew. What was sent stays where it is.
#[tokio::test]
async fn workflows_a_failed_claim_gave_a_worker_unsent_are_dispatched_anew() {
    let (engine, clock) = engine().await;
    let (session, mut rx) = attach(&engine, "w1", 1).await;
    start(&engine, "sent").await;
    assert_eq!(dispatched(&mut rx).len(), 1);
    clock.advance(1);
    start(&engine, "lost").await;
    engine.workers.grant_credits(&session, 5, 0);
    // What the failed claim wrote: "lost" is the stream's now, and nothing went down it.
    let claim = waymark_store::Claim {
        worker_id: "w1".into(),
        session_id: session.lease_id.clone(),
        app_version: "v1".into(),
        workflow_names: vec!["wf".into()],
        queues: session.registration.queues.clone(),
        limit: 5,
    };
    let taken = engine.core.store.claim_workflows(&claim, clock.now()).await.unwrap();
    assert_eq!(taken.len(), 1);
    // Without the doubt it stays stuck: nothing to claim, nothing recovered.
    session.want_claims();
    dispatch::dispatch_once(&engine).await;
    assert!(dispatched(&mut rx).is_empty());

    session.doubt();
    dispatch::dispatch_once(&engine).await;
    let got = dispatched(&mut rx);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].workflow.workflow_id.as_str(), got[0].workflow.epoch),
        ("lost", 2)
    );
    assert!(!session.in_doubt());
    let sent = engine.workflows.get_workflow("sent").await.unwrap();
    assert_eq!((sent.status, sent.epoch), (WorkflowStatus::Pending, 1));
    assert_eq!(
        engine.workflows.get_workflow("lost").await.unwrap().recovery_attempts,
        0
    );
}

/// A start does not dispatch straight to a stream in doubt (the settling could take its row
/// for lost): it queues, and the pass that settles the doubt claims it.
#[tokio::test]
async fn a_stream_in_doubt_takes_no_direct_dispatch_until_settled() {
    let (engine, _) = engine().await;
    let (session, mut rx) = attach(&engine, "w1", 2).await;
    session.doubt();
    start(&engine, "queued").await;
    assert!(dispatched(&mut rx).is_empty());
    assert_eq!(
        engine.workflows.get_workflow("queued").await.unwrap().status,
        WorkflowStatus::Enqueued
    );
    dispatch::dispatch_once(&engine).await;
    assert_eq!(dispatched(&mut rx)[0].workflow.workflow_id, "queued");
    start(&engine, "direct").await;
    assert_eq!(dispatched(&mut rx)[0].workflow.workflow_id, "direct");
}

fn steps_dispatched(rx: &mut mpsc::Receiver<ToWorker>) -> Vec<waymark_store::StepTask> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        if let ToWorker::DispatchStep(t) = m {
            out.push(*t);
        }
    }
    out
}

fn wakeups(rx: &mut mpsc::Receiver<ToWorker>) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        if let ToWorker::Wakeup { workflow_id, step_id } = m {
            out.push((workflow_id, step_id));
        }
    }
    out
}

#[tokio::test]
async fn remote_steps_respect_step_credits_wake_the_caller_and_retry_after_a_timeout() {
    use crate::ops::call_step::{default_policy, run as call_step};
    use crate::ops::step_result::run as finish_step;
    let (engine, clock) = engine().await;
    let (caller, mut caller_rx) = attach(&engine, "caller", 1).await;
    start(&engine, "c").await;
    let epoch = dispatched(&mut caller_rx)[0].workflow.epoch;
    let (runner, mut runner_rx) = attach(&engine, "runner", 0).await;
    let call = |n: u32| waymark_store::NewStepTask {
        step_name: "double".into(),
        input: n.to_string(),
        policy: waymark_store::StepPolicy {
            max_attempts: 2,
            timeout_ms: 1_000,
            ..default_policy()
        },
        trace: None,
    };
    let fence = || Fence {
        workflow_id: "c".into(),
        epoch,
    };
    for step in 0..3 {
        assert!(call_step(&engine, &caller, fence(), step, call(step))
            .await
            .unwrap()
            .is_none());
    }
    // No step credits yet: nothing is dispatched; then only as many as granted.
    dispatch::dispatch_once(&engine).await;
    assert!(steps_dispatched(&mut runner_rx).is_empty());
    engine.workers.grant_credits(&runner, 0, 2);
    dispatch::dispatch_once(&engine).await;
    let running = steps_dispatched(&mut runner_rx);
    assert_eq!(running.iter().map(|t| t.step_id).collect::<Vec<_>>(), [0, 1]);
    // A result wakes exactly the waiting step, over the caller's stream.
    let attempt = waymark_store::StepAttempt {
        workflow_id: "c".into(),
        step_id: 0,
        attempt: 1,
        session_id: runner.lease_id.clone(),
    };
    finish_step(&engine, &runner, attempt, Outcome::Output("0".into()))
        .await
        .unwrap();
    assert_eq!(wakeups(&mut caller_rx), [("c".to_string(), 0)]);
    let rec = call_step(&engine, &caller, fence(), 0, call(0)).await.unwrap().unwrap();
    assert_eq!(rec.outcome, Outcome::Output("0".into()));
    // Step 1 outlives its timeout: the timeout pass fails it, and it is dispatched again.
    clock.advance(1_001);
    engine.expire_steps().await;
    clock.advance(2_000);
    engine.workers.grant_credits(&runner, 0, 2);
    dispatch::dispatch_once(&engine).await;
    let mut again: Vec<_> = steps_dispatched(&mut runner_rx)
        .iter()
        .map(|t| (t.step_id, t.attempt))
        .collect();
    again.sort_unstable();
    assert_eq!(again, [(1, 2), (2, 1)], "step 1's second attempt, and step 2 at last");
    // The first attempt's late result is refused.
    let late = waymark_store::StepAttempt {
        workflow_id: "c".into(),
        step_id: 1,
        attempt: 1,
        session_id: runner.lease_id.clone(),
    };
    let e = finish_step(&engine, &runner, late, Outcome::Output("1".into()))
        .await
        .unwrap_err();
    assert_eq!(e.reason, "STEP_ATTEMPT_STALE");
}

#[tokio::test]
async fn a_send_hands_the_message_to_the_waiting_receive_with_the_wakeup() {
    let (engine, _) = engine().await;
    let (session, mut rx) = attach(&engine, "w1", 1).await;
    start(&engine, "r").await;
    let epoch = dispatched(&mut rx)[0].workflow.epoch;
    let fence = Fence {
        workflow_id: "r".into(),
        epoch,
    };
    let waiting = crate::ops::recv::run(&engine, &session, fence.clone(), 0, "t".into(), T0 + 60_000)
        .await
        .unwrap();
    assert_eq!(waiting, waymark_store::Received::Waiting);
    let send = |m: &str| messages::SendRequest {
        workflow_id: "r".into(),
        topic: "t".into(),
        message: m.into(),
        idempotency_key: String::new(),
    };
    engine.messaging().send_message(send("\"hi\"")).await.unwrap();
    match rx.try_recv() {
        Ok(ToWorker::Delivered {
            workflow_id,
            step_id,
            message,
        }) => assert_eq!((workflow_id.as_str(), step_id, message.as_str()), ("r", 0, "\"hi\"")),
        other => panic!("expected the message with the wakeup, got {other:?}"),
    }
    // Already recorded: asking again gets the same answer; a second send finds no waiter.
    let again = crate::ops::recv::run(&engine, &session, fence, 0, "t".into(), T0 + 60_000)
        .await
        .unwrap();
    assert_eq!(again, waymark_store::Received::Delivered("\"hi\"".into()));
    engine.messaging().send_message(send("2")).await.unwrap();
    assert!(rx.try_recv().is_err(), "nothing waits now");
}

#[tokio::test]
async fn workers_declare_queues_and_starts_need_an_existing_queue() {
    let (engine, _) = engine().await;
    let e = engine
        .workflows
        .start_workflow(StartRequest {
            workflow_name: "wf".into(),
            input: "1".into(),
            queue_name: "emails".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.reason, "WORKFLOW_NAME_UNKNOWN");
    let (tx, _rx) = mpsc::channel(10);
    let mut r = registration("w1");
    r.queues = vec!["emails".into()];
    engine.workers.attach_worker(r, tx).await.unwrap();
    assert_eq!(
        engine.queues().get("emails").await.unwrap().limits,
        waymark_store::QueueLimits::default()
    );
    let start = |queue: &str| StartRequest {
        workflow_name: "wf".into(),
        input: "1".into(),
        queue_name: queue.into(),
        ..Default::default()
    };
    engine.workflows.start_workflow(start("emails")).await.unwrap();
    let e = engine.workflows.start_workflow(start("nowhere")).await.unwrap_err();
    assert_eq!((e.code, e.reason), (ErrorCode::NotFound, "QUEUE_NOT_FOUND"));
}

#[tokio::test]
async fn a_worker_id_is_bound_to_its_key_live_or_quiet() {
    let (engine, clock) = engine().await;
    let keyed = |key: &str| Registration {
        key_id: Some(key.into()),
        name_patterns: Vec::new(),
        ..registration("w1")
    };
    let (tx, _rx1) = mpsc::channel(100);
    engine.workers.attach_worker(keyed("k1"), tx).await.unwrap();
    let refused = |r: EngineResult<Arc<WorkerSession>>| match r {
        Err(e) => assert_eq!(e.reason, "WORKER_ID_IN_USE"),
        Ok(_) => panic!("another key took the worker id over"),
    };
    let (tx, _rx2) = mpsc::channel(100);
    refused(engine.workers.attach_worker(keyed("k2"), tx).await);
    // Quiet well past two heartbeats: the same key's reconnect replaces the stream, and
    // another key is still refused.
    clock.advance(60_000);
    let (tx, _rx3) = mpsc::channel(100);
    refused(engine.workers.attach_worker(keyed("k2"), tx).await);
    let (tx, _rx4) = mpsc::channel(100);
    refused(engine.workers.attach_worker(registration("w1"), tx).await);
    let (tx, _rx5) = mpsc::channel(100);
    engine
        .workers
        .attach_worker(keyed("k1"), tx)
        .await
        .expect("the owner reconnects");
}
