//! The per-stream bookkeeping: credits, what the stream holds, what a heartbeat says it lost.

use super::*;

fn session() -> Arc<WorkerSession> {
    let registration = Registration {
        worker_id: "w".into(),
        app_version: "v1".into(),
        workflow_names: vec!["wf".into()],
        step_names: vec![],
        queues: vec!["default".into()],
        key_id: None,
        name_patterns: Vec::new(),
        ..Default::default()
    };
    let (tx, _rx) = mpsc::channel(1);
    Sessions::default().attach(registration, "lease".into(), 0, tx)
}

fn fence(id: &str, epoch: u64) -> Fence {
    Fence {
        workflow_id: id.into(),
        epoch,
    }
}

fn ids(fences: &[Fence]) -> Vec<(&str, u64)> {
    let mut v: Vec<(&str, u64)> = fences.iter().map(|f| (f.workflow_id.as_str(), f.epoch)).collect();
    v.sort();
    v
}

#[test]
fn only_dispatches_the_worker_had_received_and_no_longer_lists_are_lost() {
    let s = session();
    s.note_dispatched("a", 1);
    s.note_dispatched("b", 3);
    s.note_dispatched("c", 1);
    // The worker had taken two dispatches off the stream and lists only "b": "a" is lost;
    // "c" is still on its way and is not judged.
    assert_eq!(ids(&s.lost(&["b".into()], 2)), [("a", 1)]);
    // Forgotten once reported: not lost twice.
    assert!(s.lost(&["b".into()], 2).is_empty());
    // Let go of in the server's sight (completed, parked): never lost.
    s.let_go(&fence("b", 3));
    assert_eq!(ids(&s.lost(&[], 3)), [("c", 1)]);
    assert!(s.lost(&[], 3).is_empty());
}

#[test]
fn credits_are_capped() {
    let s = session();
    s.grant(u32::MAX);
    s.grant(5);
    assert_eq!(s.credits(), MAX_CREDITS);
    s.grant_steps(MAX_CREDITS + 1);
    assert_eq!(s.step_credits(), MAX_CREDITS);
}

#[test]
fn a_stream_holds_only_what_was_dispatched_to_it_at_that_epoch() {
    let s = session();
    assert!(!s.holds("a", 1));
    s.note_dispatched("a", 2);
    assert!(s.holds("a", 2));
    assert!(!s.holds("a", 1), "an older epoch is not held");
    assert!(!s.holds("a", 3), "nor a guessed newer one");
    s.let_go(&fence("a", 2));
    assert!(!s.holds("a", 2));
}

#[test]
fn letting_go_of_an_older_run_keeps_the_newer_dispatch() {
    let s = session();
    s.note_dispatched("a", 1);
    s.note_dispatched("a", 2);
    // The epoch-1 run's last write is refused after the epoch-2 dispatch went out.
    s.let_go(&fence("a", 1));
    assert!(s.holds("a", 2), "the newer run is still held");
    s.let_go(&fence("a", 2));
    assert!(!s.holds("a", 2));
}

#[test]
fn a_new_dispatch_of_the_same_workflow_replaces_the_old_one() {
    let s = session();
    s.note_dispatched("a", 1);
    s.note_dispatched("a", 2);
    // The second dispatch is the one judged, at its own number and epoch.
    assert!(s.lost(&[], 1).is_empty());
    assert_eq!(ids(&s.lost(&[], 2)), [("a", 2)]);
}

#[test]
fn an_enqueued_workflow_asks_only_the_workers_that_can_run_it_to_claim() {
    let sessions = Sessions::default();
    let attach = |worker: &str, version: &str, queue: &str| {
        let registration = Registration {
            worker_id: worker.into(),
            app_version: version.into(),
            workflow_names: vec!["wf".into()],
            queues: vec![queue.into()],
            ..Default::default()
        };
        let (tx, _rx) = mpsc::channel(1);
        let s = sessions.attach(registration, format!("lease-{worker}"), 0, tx);
        // Attached: wanting its first claim. Taken, as the dispatcher would.
        assert!(s.take_claim_wanted());
        s
    };
    let (a, b, c) = (
        attach("a", "v1", "default"),
        attach("b", "v2", "default"),
        attach("c", "v1", "other"),
    );
    // Another queue, another name: nobody is asked.
    assert!(!sessions.want_claims_serving(Some("wf"), "nobody-serves", ""));
    assert!(!sessions.want_claims_serving(Some("other-name"), "default", ""));
    assert!(!sessions.want_claims_serving(None, "nobody-serves", ""));
    assert!(![&a, &b, &c].iter().any(|s| s.take_claim_wanted()));
    // Pinned to v2 on the default queue: only b.
    assert!(sessions.want_claims_serving(Some("wf"), "default", "v2"));
    assert_eq!([&a, &b, &c].map(|s| s.take_claim_wanted()), [false, true, false]);
    // Not pinned: every version on that queue.
    assert!(sessions.want_claims_serving(Some("wf"), "default", ""));
    assert_eq!([&a, &b, &c].map(|s| s.take_claim_wanted()), [true, true, false]);
    // Another replica's start names only its queue: every worker on it.
    assert!(sessions.want_claims_serving(None, "other", ""));
    assert_eq!([&a, &b, &c].map(|s| s.take_claim_wanted()), [false, false, true]);
}
