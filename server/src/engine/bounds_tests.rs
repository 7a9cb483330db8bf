//! The engine's bounds, attacked in-process: waits that lead nowhere, too many waits, a
//! history that keeps growing, an inbox nobody reads.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use waymark_store::{sqlite::SqliteStore, Fence, NewStep, Outcome, WorkflowStatus};

use super::*;
use crate::engine::messages::SendRequest;

async fn engine_with(config: EngineConfig) -> Arc<Engine> {
    let path = std::env::temp_dir().join(format!("waymark-bounds-{}.db", uuid::Uuid::new_v4().simple()));
    let store = SqliteStore::open(&format!("sqlite:{}", path.display())).await.unwrap();
    Engine::new(Arc::new(store), Arc::new(ManualClock::new(1_700_000_000_000)), config)
}

async fn running(engine: &Engine, id: &str) -> (Arc<WorkerSession>, mpsc::Receiver<ToWorker>, Fence) {
    let (tx, mut rx) = mpsc::channel(100);
    let registration = Registration {
        worker_id: format!("worker-of-{id}"),
        app_version: String::new(),
        workflow_names: vec!["wf".into()],
        step_names: vec![],
        queues: vec![],
        key_id: None,
        name_patterns: Vec::new(),
        ..Default::default()
    };
    let session = engine.workers.attach_worker(registration, tx).await.unwrap();
    super::tests::start(engine, id).await;
    engine.workers.grant_credits(&session, 1, 0);
    dispatch::dispatch_once(engine).await;
    let Ok(ToWorker::Dispatch(w)) = rx.try_recv() else {
        panic!("{id} was not dispatched")
    };
    session.note_dispatched(id, w.workflow.epoch);
    let fence = Fence {
        workflow_id: id.into(),
        epoch: w.workflow.epoch,
    };
    (session, rx, fence)
}

/// Registrations of every kind of client wait, and the places taken among the server's waits.
fn registered_waits(engine: &Engine) -> (usize, usize, usize, usize) {
    (
        engine.waits.workflows.len(),
        engine.waits.events.clients_waiting(),
        engine.waits.streams.len(),
        engine.core.config.max_waits - engine.core.shared.waits.available_permits(),
    )
}

/// Polls `done` until it holds, for up to a minute.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(tokio::time::Instant::now() < give_up, "{what} never happened");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn waits_on_what_does_not_exist_or_never_comes_leave_nothing_behind() {
    let engine = engine_with(EngineConfig::default()).await;
    let _ = running(&engine, "real").await;
    for i in 0..2_000 {
        let id = format!("missing-{i}");
        let e = engine.workflows.await_workflow(&id, None).await.unwrap_err();
        assert_eq!(e.reason, "WORKFLOW_NOT_FOUND");
        let e = engine
            .messaging()
            .get_event(&id, "k", Duration::from_secs(3600))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "WORKFLOW_NOT_FOUND");
        assert!(engine.messaging().open_stream_reader(&id, "k").await.is_err());
    }
    // Waits on a real workflow that end unanswered (their deadline, or the caller gone).
    for i in 0..200 {
        let e = engine
            .workflows
            .await_workflow("real", Some(Duration::from_millis(1)))
            .await
            .unwrap_err();
        assert_eq!(e.reason, "DEADLINE_EXCEEDED");
        let got = engine
            .messaging()
            .get_event("real", &format!("never-{i}"), Duration::from_millis(1))
            .await
            .unwrap();
        assert_eq!(got, None);
        let reader = engine
            .messaging()
            .open_stream_reader("real", &format!("s-{i}"))
            .await
            .unwrap();
        let read = tokio::time::timeout(
            Duration::from_millis(1),
            engine.messaging().next_stream_entries("real", &format!("s-{i}"), 0),
        )
        .await;
        assert!(read.is_err(), "nothing was written");
        drop(reader);
    }
    assert_eq!(registered_waits(&engine), (0, 0, 0, 0));
}

#[tokio::test]
async fn waits_past_the_cap_are_refused_and_places_come_back() {
    let engine = engine_with(EngineConfig {
        max_waits: 3,
        ..Default::default()
    })
    .await;
    let _ = running(&engine, "slow").await;
    let holders: Vec<_> = (0..3)
        .map(|i| {
            let engine = engine.clone();
            tokio::spawn(async move {
                match i {
                    0 => engine.workflows.await_workflow("slow", None).await.map(|_| ()),
                    1 => engine
                        .messaging()
                        .get_event("slow", "k", Duration::from_secs(3600))
                        .await
                        .map(|_| ()),
                    _ => {
                        let _place = engine.messaging().open_stream_reader("slow", "s").await?;
                        engine.messaging().next_stream_entries("slow", "s", 0).await.map(|_| ())
                    }
                }
            })
        })
        .collect();
    eventually("three waits", || engine.core.shared.waits.available_permits() == 0).await;
    let update = super::updates::UpdateRequest {
        workflow_id: "slow".into(),
        name: "add".into(),
        args: "1".into(),
        update_id: "u-1".into(),
        timeout: Some(Duration::from_secs(60)),
    };
    for refused in [
        engine.workflows.await_workflow("slow", None).await.map(|_| ()),
        engine
            .messaging()
            .get_event("slow", "k", Duration::from_secs(60))
            .await
            .map(|_| ()),
        engine.messaging().open_stream_reader("slow", "s").await.map(|_| ()),
        engine.workflows.update_workflow(update.clone()).await.map(|_| ()),
    ] {
        let e = refused.unwrap_err();
        assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "TOO_MANY_WAITS"));
    }
    // An update refused for want of a place sent nothing.
    assert!(engine.core.store.list_messages("slow").await.unwrap().is_empty());
    // A read that answers at once is not a wait and still gets through.
    assert_eq!(
        engine.messaging().get_event("slow", "k", Duration::ZERO).await.unwrap(),
        None
    );
    for h in &holders {
        h.abort();
    }
    for h in holders {
        let _ = h.await;
    }
    assert_eq!(registered_waits(&engine), (0, 0, 0, 0));
    let again = engine
        .workflows
        .await_workflow("slow", Some(Duration::from_millis(1)))
        .await;
    assert_eq!(again.unwrap_err().reason, "DEADLINE_EXCEEDED", "a place is free again");
    // An update waits in a place too, and gives it back when it gives up unanswered.
    let pending = engine
        .workflows
        .update_workflow(super::updates::UpdateRequest {
            timeout: Some(Duration::from_millis(1)),
            ..update
        })
        .await
        .unwrap_err();
    assert_eq!(pending.reason, "UPDATE_PENDING");
    assert_eq!(registered_waits(&engine), (0, 0, 0, 0));
}

#[tokio::test]
async fn a_history_growing_past_its_cap_fails_the_workflow_at_the_write() {
    let engine = engine_with(EngineConfig {
        max_history_bytes: 10_000,
        ..Default::default()
    })
    .await;
    let (session, _rx, fence) = running(&engine, "grows").await;
    let step = |id: u32| NewStep {
        step_id: id,
        name: "s".into(),
        outcome: Outcome::Output(format!("\"{}\"", "x".repeat(3_000))),
        attempts: 1,
        started_at: None,
    };
    for id in 0..3 {
        engine
            .workers
            .record_step(&session, fence.clone(), step(id))
            .await
            .unwrap();
    }
    // Resends of a recorded step (a reply lost, a database that was away) are not counted again.
    for _ in 0..10 {
        let again = engine
            .workers
            .record_step(&session, fence.clone(), step(2))
            .await
            .unwrap();
        assert_eq!(again, waymark_store::Recorded::AlreadyRecorded);
    }
    let e = engine
        .workers
        .record_step(&session, fence.clone(), step(3))
        .await
        .unwrap_err();
    assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "HISTORY_TOO_LARGE"));
    let w = engine.workflows.get_workflow("grows").await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Error);
    let Some(Outcome::Failure(failure)) = w.outcome else {
        panic!("not failed: {:?}", w.outcome)
    };
    assert_eq!(failure.kind, "HISTORY_TOO_LARGE");
    // The run is over on this stream: later writes are refused, not recorded.
    let e = engine
        .workers
        .record_step(&session, fence.clone(), step(4))
        .await
        .unwrap_err();
    assert_eq!(e.reason, "STALE_EPOCH");
    assert_eq!(engine.core.store.list_steps("grows").await.unwrap().len(), 3);
}

#[tokio::test]
async fn an_unread_inbox_is_bounded() {
    let engine = engine_with(EngineConfig {
        max_unread_messages: 5,
        ..Default::default()
    })
    .await;
    let _ = running(&engine, "deaf").await;
    let send = |n: usize| SendRequest {
        workflow_id: "deaf".into(),
        topic: String::new(),
        message: n.to_string(),
        idempotency_key: String::new(),
    };
    for n in 0..5 {
        engine.messaging().send_message(send(n)).await.unwrap();
    }
    for n in 5..50 {
        let e = engine.messaging().send_message(send(n)).await.unwrap_err();
        assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "INBOX_FULL"));
    }
    assert_eq!(engine.core.store.list_messages("deaf").await.unwrap().len(), 5);
}

#[tokio::test]
async fn waits_of_workflows_that_moved_on_are_dropped() {
    let engine = engine_with(EngineConfig::default()).await;
    let (session, _rx, fence) = running(&engine, "waiter").await;
    let _child = running(&engine, "child").await;
    let later = engine.now_ms() + 60_000;
    // Three of the worker stream's operations wait: an event read, a receive, a child awaited.
    let got = crate::ops::get_event::run(&engine, &session, fence.clone(), 0, "waiter", "k", later)
        .await
        .unwrap();
    assert_eq!(got, waymark_store::Received::Waiting);
    let got = crate::ops::recv::run(&engine, &session, fence.clone(), 1, "t".into(), later)
        .await
        .unwrap();
    assert_eq!(got, waymark_store::Received::Waiting);
    let got = crate::ops::await_child::run(&engine, &session, fence.clone(), 2, "child".into())
        .await
        .unwrap();
    assert!(got.is_none());
    let waiting = |e: &Engine| {
        (
            e.waits.events.keys().len(),
            e.waits.recv.keys().len(),
            e.waits.children.keys().len(),
        )
    };
    assert_eq!(waiting(&engine), (1, 1, 1));
    // The workflow finishes without anything it waited for happening.
    engine
        .workers
        .complete_workflow(&session, fence, vec![], Outcome::Output("1".into()))
        .await
        .unwrap();
    assert_eq!(waiting(&engine), (0, 0, 0), "the poller asks about nothing");
    assert_eq!(
        (engine.waits.recv.len(), engine.waits.children.len()),
        (0, 0),
        "and nothing is kept"
    );
}
