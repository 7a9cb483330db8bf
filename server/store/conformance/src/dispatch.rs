//! Claims, worker leases, recovery and dead-lettering.

use std::collections::HashSet;

use super::*;

pub async fn claim_filters(s: Arc<dyn Store>) {
    let s = &*s;
    let with_version = |id: &str, v: &str| NewWorkflow {
        app_version: Some(v.into()),
        ..wf(id, "A", "q")
    };
    start(s, wf("a", "A", "q"), T).await; // runnable, unpinned
    start(s, wf("b", "B", "q"), T + 1).await; // name not served
    start(s, wf("c", "A", "q2"), T + 2).await; // queue not served
    start(s, with_version("d", "v2"), T + 3).await; // other app version
    start(s, with_version("e", V1), T + 4).await; // runnable, pinned to ours
    start(s, wf("f", "A", "q"), T + 5).await;
    s.cancel_workflow("f", T + 6).await.unwrap(); // not ENQUEUED

    // A worker serving nothing gets nothing.
    assert!(s
        .claim_workflows(&claim("w", &[], &["q"], 9), T + 7)
        .await
        .unwrap()
        .is_empty());
    assert!(s
        .claim_workflows(&claim("w", &["A"], &[], 9), T + 7)
        .await
        .unwrap()
        .is_empty());
    assert!(s
        .claim_workflows(&claim("w", &["A"], &["q"], 0), T + 7)
        .await
        .unwrap()
        .is_empty());

    let got = s
        .claim_workflows(&claim("w1", &["A", "Z"], &["q", "z"], 10), T + 10)
        .await
        .unwrap();
    assert_eq!(ids(&got), ["a", "e"]);
    for c in &got {
        let w = &c.workflow;
        assert_eq!(w.status, WorkflowStatus::Pending);
        assert_eq!(w.worker_id.as_deref(), Some("w1"));
        assert_eq!(w.app_version.as_deref(), Some(V1), "NULL version is pinned on claim");
        assert_eq!((w.epoch, w.updated_at), (1, T + 10));
        assert!(c.steps.is_empty());
        assert_eq!(&get(s, &w.workflow_id).await, w);
    }
    // Claimed workflows are no longer claimable; the others stay as they were.
    assert!(s
        .claim_workflows(&claim("w2", &["A"], &["q"], 10), T + 11)
        .await
        .unwrap()
        .is_empty());
    for id in ["b", "c", "d"] {
        let w = get(s, id).await;
        assert_eq!((w.status, w.epoch), (WorkflowStatus::Enqueued, 0), "{id}");
    }
    assert_eq!(get(s, "f").await.status, WorkflowStatus::Cancelled);
    // Each one is claimable by a worker that matches it.
    let got = s
        .claim_workflows(&claim("w3", &["B"], &["q", "q2"], 10), T + 12)
        .await
        .unwrap();
    assert_eq!(ids(&got), ["b"]);
}

pub async fn claim_limit_and_order(s: Arc<dyn Store>) {
    let s = &*s;
    // Ids run against creation order so "oldest first" cannot be satisfied by id order.
    for (i, id) in ["e", "d", "c", "b", "a"].into_iter().enumerate() {
        start(s, wf(id, "A", "q"), T + i as i64).await;
    }
    let c = |limit| claim("w", &["A"], &["q"], limit);
    assert_eq!(ids(&s.claim_workflows(&c(2), T + 10).await.unwrap()), ["e", "d"]);
    assert_eq!(ids(&s.claim_workflows(&c(2), T + 11).await.unwrap()), ["c", "b"]);
    assert_eq!(ids(&s.claim_workflows(&c(2), T + 12).await.unwrap()), ["a"]);
    assert!(s.claim_workflows(&c(2), T + 13).await.unwrap().is_empty());
}

pub async fn claim_raises_epoch_and_returns_steps(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w", "A", "q"), T).await;
    start(s, wf("other", "A", "q"), T + 1).await;
    assert_eq!(claim_one(s, "k1", "A", "w", T + 10).await, 1);
    // Recorded out of order; read back in order, with their own values.
    let f = fence("w", 1);
    s.record_step(&f, step(2, "s2", "\"two\""), T + 12).await.unwrap();
    s.record_step(&f, step(0, "s0", "0"), T + 13).await.unwrap();
    let mut failed = step(1, "s1", "");
    failed.outcome = failure("Boom");
    failed.attempts = 3;
    s.record_step(&f, failed.clone(), T + 14).await.unwrap();

    let released = s.release_worker("k1", 5, T + 20).await.unwrap();
    assert_eq!(released.requeued, ["w"]);
    let got = s
        .claim_workflows(&claim("k2", &["A"], &["q"], 1), T + 30)
        .await
        .unwrap();
    assert_eq!(ids(&got), ["w"]);
    assert_eq!(got[0].workflow.epoch, 2);
    assert_eq!(got[0].workflow.worker_id.as_deref(), Some("k2"));
    let steps = &got[0].steps;
    let summary: Vec<(u32, &str, u64, Millis, u32)> = steps
        .iter()
        .map(|s| (s.step_id, s.name.as_str(), s.epoch, s.recorded_at, s.attempts))
        .collect();
    assert_eq!(
        summary,
        [
            (0, "s0", 1, T + 13, 1),
            (1, "s1", 1, T + 14, 3),
            (2, "s2", 1, T + 12, 1)
        ]
    );
    assert_eq!(steps[0].outcome, Outcome::Output("0".into()));
    assert_eq!(steps[1].outcome, failed.outcome);
    assert_eq!(steps[2].outcome, Outcome::Output("\"two\"".into()));
    assert_eq!(&s.list_steps("w").await.unwrap(), steps);
    // The other workflow's claim carries no steps of w's.
    let other = s
        .claim_workflows(&claim("k2", &["A"], &["q"], 1), T + 31)
        .await
        .unwrap();
    assert_eq!(ids(&other), ["other"]);
    assert!(other[0].steps.is_empty());
}

pub async fn concurrent_claims_take_each_workflow_once(s: Arc<dyn Store>) {
    const N: usize = 200;
    for i in 0..N {
        start(&*s, wf(&format!("w{i:03}"), "A", "q"), T + (i % 7) as i64).await;
    }
    let mut tasks = Vec::new();
    for k in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let worker = format!("k{k}");
            let mut mine = Vec::new();
            loop {
                let got = s
                    .claim_workflows(&claim(&worker, &["A"], &["q"], 3), T + 100)
                    .await
                    .unwrap();
                assert!(got.len() <= 3, "claim returned more than its limit");
                if got.is_empty() {
                    return mine;
                }
                for c in got {
                    assert_eq!(c.workflow.worker_id.as_deref(), Some(worker.as_str()));
                    mine.push((c.workflow.workflow_id, worker.clone()));
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(all.len(), N, "claims in total");
    assert_eq!(unique.len(), N, "distinct workflows claimed");
    for (id, worker) in &all {
        let w = get(&*s, id).await;
        assert_eq!((w.status, w.epoch), (WorkflowStatus::Pending, 1), "{id}");
        assert_eq!(w.worker_id.as_ref(), Some(worker), "{id}");
    }
}

pub async fn fencing_by_lease_expiry(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w", "A", "q"), T).await;
    start(s, wf("live", "L", "q"), T).await;
    start(s, wf("orphan", "O", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 10_000, T).await.unwrap();
    s.renew_session_lease(&session("C"), "C", T + 10_000, T).await.unwrap();
    assert_eq!(claim_one(s, "A", "A", "w", T + 1).await, 1);
    assert_eq!(claim_one(s, "C", "L", "live", T + 1).await, 1);
    // Owned by a worker that never took a lease: nothing protects it.
    assert_eq!(claim_one(s, "nobody", "O", "orphan", T + 1).await, 1);

    // While A's lease lasts, A's workflow is safe.
    let r = s.recover_expired(5, T + 2).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec!["orphan".to_string()], vec![]));
    assert_eq!(get(s, "w").await.status, WorkflowStatus::Pending);

    // A goes silent: its lease ends before t, and recovery at t takes the workflow back.
    let t = T + 2_000;
    // A lease that ends exactly now still holds ("ended before now" is what expires)...
    s.renew_session_lease(&session("A"), "A", t, t - 1).await.unwrap();
    assert_eq!(s.recover_expired(5, t).await.unwrap(), Recovery::default());
    // ...one millisecond earlier and it does not.
    s.renew_session_lease(&session("A"), "A", t - 1, t - 1).await.unwrap();
    let r = s.recover_expired(5, t).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec!["w".to_string()], vec![]));
    let w = get(s, "w").await;
    assert_eq!(
        (w.status, w.recovery_attempts, w.epoch),
        (WorkflowStatus::Enqueued, 1, 1)
    );
    assert_eq!(get(s, "live").await.status, WorkflowStatus::Pending, "live lease kept");
    // A, unaware, writes while the workflow waits in its queue: refused.
    assert!(matches!(
        s.record_step(&fence("w", 1), step(0, "a", "1"), t + 1).await,
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Enqueued,
            ..
        })
    ));

    s.renew_session_lease(&session("B"), "B", t + 10_000, t).await.unwrap();
    assert_eq!(claim_one(s, "B", "A", "w", t + 2).await, 2);
    let stale = |r| {
        matches!(
            r,
            Err(StoreError::StaleEpoch {
                presented: 1,
                current: 2,
                ..
            })
        )
    };
    assert!(stale(
        s.record_step(&fence("w", 1), step(0, "a", "1"), t + 3)
            .await
            .map(|_| ())
    ));
    assert!(stale(
        s.complete_workflow(&fence("w", 1), Outcome::Output("\"A\"".into()), t + 3)
            .await
            .map(|_| ())
    ));
    assert_eq!(
        s.record_step(&fence("w", 2), step(0, "b", "2"), t + 4).await.unwrap(),
        Recorded::New
    );
    let done = s
        .complete_workflow(&fence("w", 2), Outcome::Output("\"B\"".into()), t + 5)
        .await
        .unwrap();
    assert!(!done.adopted);
    assert_eq!(done.workflow.outcome, Some(Outcome::Output("\"B\"".into())));
    let steps = s.list_steps("w").await.unwrap();
    assert_eq!(
        steps.iter().map(|s| (s.name.as_str(), s.epoch)).collect::<Vec<_>>(),
        [("b", 2)]
    );
}

pub async fn recovery_dead_letters_past_limit(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w", "A", "q"), T).await;
    // With a limit of 2, recoveries 1 and 2 requeue; the third dead-letters.
    for attempt in 1..=3u32 {
        let now = T + 10 * attempt as i64;
        assert_eq!(claim_one(s, "gone", "A", "w", now).await, attempt as u64);
        let r = s.recover_expired(2, now + 1).await.unwrap();
        let w = get(s, "w").await;
        assert_eq!(w.recovery_attempts, attempt);
        if attempt <= 2 {
            assert_eq!((r.requeued, r.dead_lettered), (vec!["w".to_string()], vec![]));
            assert_eq!(w.status, WorkflowStatus::Enqueued);
        } else {
            assert_eq!((r.requeued, r.dead_lettered), (vec![], vec!["w".to_string()]));
            assert_eq!(w.status, WorkflowStatus::MaxRecoveryAttemptsExceeded);
        }
    }
    assert!(s
        .claim_workflows(&claim("k", &["A"], &["q"], 5), T + 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.recover_expired(2, T + 101).await.unwrap(), Recovery::default());
    // An operator resume gives it a fresh budget.
    let w = s.resume_workflow("w", T + 102).await.unwrap();
    assert_eq!((w.status, w.recovery_attempts), (WorkflowStatus::Enqueued, 0));
    assert_eq!(claim_one(s, "k", "A", "w", T + 103).await, 4);
}

pub async fn release_worker_takes_back_only_its_own(s: Arc<dyn Store>) {
    let s = &*s;
    for (id, name) in [("a1", "A1"), ("a2", "A2"), ("b1", "B1"), ("idle", "I")] {
        start(s, wf(id, name, "q"), T).await;
    }
    s.renew_session_lease(&session("A"), "A", T + 10_000, T).await.unwrap();
    s.renew_session_lease(&session("B"), "B", T + 10_000, T).await.unwrap();
    claim_one(s, "A", "A1", "a1", T + 1).await;
    claim_one(s, "A", "A2", "a2", T + 1).await;
    claim_one(s, "B", "B1", "b1", T + 1).await;
    s.complete_workflow(&fence("a2", 1), Outcome::Output("1".into()), T + 2)
        .await
        .unwrap();

    // Leases are live: release works regardless, because the worker said it dropped them.
    let r = s.release_worker("A", 5, T + 3).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec!["a1".to_string()], vec![]));
    let a1 = get(s, "a1").await;
    assert_eq!((a1.status, a1.recovery_attempts), (WorkflowStatus::Enqueued, 1));
    assert_eq!(get(s, "a2").await.status, WorkflowStatus::Success);
    let b1 = get(s, "b1").await;
    assert_eq!(
        (b1.status, b1.worker_id.as_deref()),
        (WorkflowStatus::Pending, Some("B"))
    );
    assert_eq!(get(s, "idle").await.status, WorkflowStatus::Enqueued);
    assert_eq!(s.release_worker("A", 5, T + 4).await.unwrap(), Recovery::default());
    assert_eq!(s.release_worker("nobody", 5, T + 4).await.unwrap(), Recovery::default());

    // Releases count toward the same limit as expiry.
    let r = s.release_worker("B", 0, T + 5).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec![], vec!["b1".to_string()]));
    assert_eq!(get(s, "b1").await.status, WorkflowStatus::MaxRecoveryAttemptsExceeded);
}

pub async fn release_lost_takes_back_only_what_is_still_at_that_epoch(s: Arc<dyn Store>) {
    let s = &*s;
    let named = [("lost", "L"), ("done", "D"), ("again", "G"), ("other", "O")];
    for (id, name) in named {
        start(s, wf(id, name, "q"), T).await;
    }
    s.renew_session_lease(&session("A"), "A", T + 10_000, T).await.unwrap();
    for (id, name) in named {
        assert_eq!(claim_one(s, "A", name, id, T + 1).await, 1);
    }
    s.complete_workflow(&fence("done", 1), Outcome::Output("1".into()), T + 2)
        .await
        .unwrap();
    // "again" went back and was dispatched anew (epoch 2) before the stale report arrived.
    s.release_lost(&[fence("again", 1)], 5, T + 3).await.unwrap();
    assert_eq!(claim_one(s, "A", "G", "again", T + 4).await, 2);

    let lost = [
        fence("lost", 1),
        fence("done", 1),
        fence("again", 1),
        fence("missing", 1),
    ];
    let r = s.release_lost(&lost, 5, T + 5).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec!["lost".to_string()], vec![]));
    let w = get(s, "lost").await;
    assert_eq!((w.status, w.recovery_attempts), (WorkflowStatus::Enqueued, 1));
    assert_eq!(get(s, "done").await.status, WorkflowStatus::Success);
    let again = get(s, "again").await;
    assert_eq!((again.status, again.epoch), (WorkflowStatus::Pending, 2));
    assert_eq!(
        get(s, "other").await.status,
        WorkflowStatus::Pending,
        "not listed, not touched"
    );
    // Nothing listed, nothing done; and it counts toward the dead-letter limit.
    assert_eq!(s.release_lost(&[], 5, T + 6).await.unwrap(), Recovery::default());
    let r = s.release_lost(&[fence("other", 1)], 0, T + 7).await.unwrap();
    assert_eq!(r.dead_lettered, vec!["other".to_string()]);
}

/// A claim whose answer was lost leaves workflows PENDING for a live stream that never got
/// them: `release_unsent` takes back exactly those, and nothing the stream was sent, nothing of
/// another stream's, nothing that moved on.
pub async fn release_unsent_takes_back_only_what_the_stream_was_never_sent(s: Arc<dyn Store>) {
    let s = &*s;
    let named = [("sent", "S"), ("unsent", "U"), ("finished", "F"), ("theirs", "T")];
    for (id, name) in named {
        start(s, wf(id, name, "q"), T).await;
    }
    s.renew_session_lease(&session("A"), "A", T + 10_000, T).await.unwrap();
    s.renew_session_lease(&session("B"), "B", T + 10_000, T).await.unwrap();
    for (id, name) in [("sent", "S"), ("unsent", "U"), ("finished", "F")] {
        assert_eq!(claim_one(s, "A", name, id, T + 1).await, 1);
    }
    assert_eq!(claim_one(s, "B", "T", "theirs", T + 1).await, 1);
    s.complete_workflow(&fence("finished", 1), Outcome::Output("1".into()), T + 2)
        .await
        .unwrap();

    // "sent" went down the stream at epoch 1; a stale note of an older epoch does not cover it.
    let r = s
        .release_unsent(&session("A"), &[fence("sent", 1), fence("unsent", 0)], T + 3)
        .await
        .unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (vec!["unsent".to_string()], vec![]));
    let w = get(s, "unsent").await;
    assert_eq!(
        (w.status, w.recovery_attempts),
        (WorkflowStatus::Enqueued, 0),
        "the worker never had it: not a recovery"
    );
    assert_eq!(get(s, "sent").await.status, WorkflowStatus::Pending);
    assert_eq!(get(s, "finished").await.status, WorkflowStatus::Success);
    assert_eq!(
        get(s, "theirs").await.status,
        WorkflowStatus::Pending,
        "another stream's"
    );
    // Claimed again, it is dispatched anew at the next epoch.
    assert_eq!(claim_one(s, "A", "U", "unsent", T + 4).await, 2);
    // Nothing sent at all: everything the stream owns goes back.
    let r = s.release_unsent(&session("A"), &[], T + 5).await.unwrap();
    let mut requeued = r.requeued;
    requeued.sort();
    assert_eq!(requeued, vec!["sent".to_string(), "unsent".to_string()]);
}

pub async fn prune_sessions_only_idle_expired(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("busy", "B", "q"), T).await;
    start(s, wf("finished", "F", "q"), T).await;
    for (worker, until) in [
        ("old-idle", T - 10),
        ("old-busy", T - 10),
        ("old-done", T - 10),
        ("live", T + 10),
    ] {
        s.renew_session_lease(&session(worker), worker, until, T - 20)
            .await
            .unwrap();
    }
    claim_one(s, "old-busy", "B", "busy", T - 15).await;
    claim_one(s, "old-done", "F", "finished", T - 15).await;
    s.complete_workflow(&fence("finished", 1), Outcome::Output("1".into()), T - 12)
        .await
        .unwrap();

    // old-idle and old-done go; old-busy still owns a running workflow; live has not expired.
    assert_eq!(s.prune_sessions(T).await.unwrap(), 2);
    assert_eq!(s.prune_sessions(T).await.unwrap(), 0);
    // Pruning did not touch the busy worker's workflow.
    let busy = get(s, "busy").await;
    assert_eq!(
        (busy.status, busy.worker_id.as_deref()),
        (WorkflowStatus::Pending, Some("old-busy"))
    );
    // Once it owns nothing it goes too, and "live" once its lease has ended.
    s.recover_expired(5, T).await.unwrap();
    assert_eq!(s.prune_sessions(T).await.unwrap(), 1);
    assert_eq!(s.prune_sessions(T + 11).await.unwrap(), 1);
    assert_eq!(s.prune_sessions(T + 11).await.unwrap(), 0);
}

/// Leases belong to streams: a worker that reconnected on a new stream does not keep alive the
/// workflows of an old stream that went quiet (half-open, on another replica).
pub async fn old_stream_workflows_recovered_despite_new_stream(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w1", "N", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 10_000, T).await.unwrap();
    claim_one(s, "A", "N", "w1", T).await;
    // The old stream goes quiet; the same worker opens a new stream with a fresh lease.
    s.renew_session_lease(&session("A"), "A", T + 100, T + 1).await.unwrap();
    s.renew_session_lease("A/stream-2", "A", T + 60_000, T + 1)
        .await
        .unwrap();
    assert!(
        s.recover_expired(5, T + 100).await.unwrap().requeued.is_empty(),
        "not before the old lease ends"
    );
    let r = s.recover_expired(5, T + 101).await.unwrap();
    assert_eq!(r.requeued, ["w1"]);
    // Its new stream takes it again, with a higher epoch.
    let mut again = claim("A", &["N"], &["q"], 1);
    again.session_id = "A/stream-2".into();
    let got = s.claim_workflows(&again, T + 102).await.unwrap();
    assert_eq!((ids(&got), got[0].workflow.epoch), (vec!["w1"], 2));
}

/// A start may dispatch at once: the workflow is inserted PENDING at epoch 1, owned by the
/// worker stream, pinned to its version; an existing id is returned untouched.
pub async fn start_with_assignment_dispatches_at_once(s: Arc<dyn Store>) {
    let s = &*s;
    let assign = Assignment {
        worker_id: "A".into(),
        session_id: session("A"),
        app_version: V1.into(),
    };
    let new = NewWorkflow {
        assign: Some(assign.clone()),
        ..wf("direct", "N", "q")
    };
    let started = s.start_workflow(new.clone(), T).await.unwrap();
    let w = &started.workflow;
    assert!(started.created);
    assert_eq!(
        (w.status, w.epoch, w.worker_id.as_deref(), w.app_version.as_deref()),
        (WorkflowStatus::Pending, 1, Some("A"), Some(V1))
    );
    // Fenced like any dispatch: epoch 1 may write.
    let step = NewStep {
        step_id: 0,
        name: "s".into(),
        outcome: Outcome::Output("1".into()),
        attempts: 1,
        started_at: None,
    };
    assert_eq!(
        s.record_step(&fence("direct", 1), step, T + 1).await.unwrap(),
        Recorded::New
    );
    // Starting the same id again, with another assignment, changes nothing.
    let again = NewWorkflow {
        assign: Some(Assignment {
            worker_id: "B".into(),
            ..assign
        }),
        ..new
    };
    let second = s.start_workflow(again, T + 2).await.unwrap();
    assert!(!second.created);
    assert_eq!(
        (second.workflow.worker_id.as_deref(), second.workflow.epoch),
        (Some("A"), 1)
    );
    // It is not claimable (not ENQUEUED), and its stream's lease protects it like a claim's.
    assert!(s
        .claim_workflows(&claim("B", &["N"], &["q"], 10), T + 3)
        .await
        .unwrap()
        .is_empty());
    s.renew_session_lease(&session("A"), "A", T + 10, T).await.unwrap();
    assert!(s.recover_expired(5, T + 5).await.unwrap().requeued.is_empty());
    assert_eq!(s.recover_expired(5, T + 11).await.unwrap().requeued, ["direct"]);
    // An explicitly chosen version wins over the worker's.
    let pinned = NewWorkflow {
        app_version: Some("v9".into()),
        assign: Some(Assignment {
            worker_id: "A".into(),
            session_id: session("A"),
            app_version: V1.into(),
        }),
        ..wf("pinned", "N", "q")
    };
    assert_eq!(
        s.start_workflow(pinned, T)
            .await
            .unwrap()
            .workflow
            .app_version
            .as_deref(),
        Some("v9")
    );
}

pub async fn claims_take_lower_priority_first_then_oldest(s: Arc<dyn Store>) {
    let s = &*s;
    for (i, (id, priority)) in [("a", 0), ("b", 5), ("c", -1), ("d", 0)].into_iter().enumerate() {
        let new = NewWorkflow {
            priority,
            ..wf(id, "P", "q")
        };
        start(s, new, T + i as Millis).await;
    }
    assert_eq!(get(s, "b").await.priority, 5);
    let first = s.claim_workflows(&claim("A", &["P"], &["q"], 2), T + 10).await.unwrap();
    assert_eq!(ids(&first), ["c", "a"]);
    let rest = s.claim_workflows(&claim("A", &["P"], &["q"], 2), T + 11).await.unwrap();
    assert_eq!(ids(&rest), ["d", "b"]);
}

/// A worker id is held by the key of its live stream: another key (or none) gets it only once
/// that lease has ended; the same key gets it at once (a reconnect through another replica).
pub async fn a_worker_id_is_held_by_the_key_of_its_live_stream(s: Arc<dyn Store>) {
    let lease = T + 10_000;
    assert!(s.hold_worker_id("s1", "w", Some("k1"), lease, T).await.unwrap());
    assert!(
        !s.hold_worker_id("s2", "w", Some("k2"), lease, T + 1).await.unwrap(),
        "another key"
    );
    assert!(
        !s.hold_worker_id("s3", "w", None, lease, T + 1).await.unwrap(),
        "no key"
    );
    assert!(
        s.hold_worker_id("s4", "w", Some("k1"), lease + 1, T + 2).await.unwrap(),
        "same key"
    );
    assert!(
        s.hold_worker_id("s5", "other", Some("k2"), lease, T + 2).await.unwrap(),
        "another id"
    );
    // Once every live stream of the id is past its lease, anyone may have it.
    assert!(s
        .hold_worker_id("s6", "w", Some("k2"), lease + 20_000, lease + 2)
        .await
        .unwrap());
    // Streams without keys (authentication off) share ids as before.
    assert!(s.hold_worker_id("s7", "free", None, lease, T).await.unwrap());
    assert!(s.hold_worker_id("s8", "free", None, lease, T + 1).await.unwrap());
}

/// A write refused for a stale fence lets go of the workflow's row before it answers. A
/// transaction dropped instead is rolled back only when the pool next gets to its connection,
/// and a claim meanwhile passes the requeued workflow by (`SKIP LOCKED`): the workflow waits
/// for the next dispatch pass. Each round requeues the workflow, sends one kind of refused
/// write from the old epoch, and claims at once. (A race when broken, so it is run often.)
pub async fn refused_writes_leave_the_workflow_claimable_at_once(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w", "A", "q"), T).await;
    let mut now = T;
    for round in 0..60u32 {
        now += 10;
        let epoch = claim_one(s, "A", "A", "w", now).await;
        s.release_worker("A", 1000, now + 1).await.unwrap();
        let stale = fence("w", epoch);
        let refused = match round % 6 {
            0 | 1 => {
                // What every composed write begins with, either way it holds the row.
                let lock = if round % 6 == 0 {
                    FenceLock::Shared
                } else {
                    FenceLock::Alone
                };
                let mut tx = s.begin(now + 2).await.unwrap();
                let refused = tx.fence(&stale, 0, lock).await.err();
                tx.rollback().await;
                refused
            }
            2 => s.continue_as_new(&stale, "{}", now + 2).await.err(),
            3 => {
                let targets = [WaitTarget::Step(0)];
                s.select_step(&stale, 1, &targets, WaitFor::First, now + 2).await.err()
            }
            4 => s.park(&stale, 0, now + 60_000, &ParkedOn::Timer, now + 2).await.err(),
            _ => {
                let mut tx = s.begin(now + 2).await.unwrap();
                let refused = tx.fence(&stale, 0, FenceLock::Shared).await.err();
                tx.rollback().await;
                refused
            }
        };
        assert!(
            matches!(
                refused,
                Some(StoreError::NotRunning { .. } | StoreError::StaleEpoch { .. })
            ),
            "round {round}: {refused:?}"
        );
    }
    claim_one(s, "A", "A", "w", now + 10).await;
}
