//! Step checkpoints: idempotent retries, non-determinism, and fencing under races.

use super::*;

pub async fn record_step_outcomes(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("w", "A", "q"), T).await;
    start(s, wf("idle", "B", "q"), T).await;
    let epoch = claim_one(s, "k", "A", "w", T + 1).await;
    let f = fence("w", epoch);
    let first = step(0, "fetch", r#"{"n": 1}"#);
    assert_eq!(s.record_step(&f, first.clone(), T + 2).await.unwrap(), Recorded::New);
    // A retried request (same step, same outcome) is acknowledged, not written twice.
    assert_eq!(
        s.record_step(&f, first.clone(), T + 3).await.unwrap(),
        Recorded::AlreadyRecorded
    );

    match s.record_step(&f, step(0, "charge", r#"{"n": 1}"#), T + 4).await {
        Err(StoreError::NonDeterminism {
            workflow_id,
            step_id,
            recorded,
            presented,
        }) => assert_eq!(
            (workflow_id.as_str(), step_id, recorded.as_str(), presented.as_str()),
            ("w", 0, "fetch", "charge")
        ),
        other => panic!("expected NonDeterminism, got {other:?}"),
    }
    // Byte-for-byte comparison: reformatted JSON is a different result.
    for other in [
        step(0, "fetch", r#"{"n":1}"#),
        NewStep {
            outcome: failure("X"),
            ..first.clone()
        },
    ] {
        assert!(matches!(
            s.record_step(&f, other, T + 5).await,
            Err(StoreError::StepConflict { ref workflow_id, step_id: 0 }) if workflow_id == "w"
        ));
    }
    match s.record_step(&fence("w", epoch + 1), step(1, "s", "1"), T + 6).await {
        Err(StoreError::StaleEpoch { presented, current, .. }) => assert_eq!((presented, current), (epoch + 1, epoch)),
        other => panic!("expected StaleEpoch, got {other:?}"),
    }
    assert!(matches!(
        s.record_step(&fence("idle", 0), step(0, "s", "1"), T + 7).await,
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Enqueued,
            ..
        })
    ));
    assert!(matches!(
        s.record_step(&fence("ghost", 1), step(0, "s", "1"), T + 8).await,
        Err(StoreError::WorkflowNotFound(id)) if id == "ghost"
    ));

    // Only the first write stands.
    let steps = s.list_steps("w").await.unwrap();
    assert_eq!(steps.len(), 1);
    let st = &steps[0];
    assert_eq!(
        (st.step_id, st.name.as_str(), st.attempts, st.epoch),
        (0, "fetch", 1, epoch)
    );
    assert_eq!((st.outcome.clone(), st.recorded_at), (first.outcome.clone(), T + 2));
    assert!(s.list_steps("idle").await.unwrap().is_empty());

    // Once finished, even a correctly fenced step is refused.
    s.complete_workflow(&f, Outcome::Output("null".into()), T + 9)
        .await
        .unwrap();
    assert!(matches!(
        s.record_step(&f, step(1, "late", "1"), T + 10).await,
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Success,
            ..
        })
    ));
    assert_eq!(s.list_steps("w").await.unwrap().len(), 1);
}

pub async fn racing_records_of_one_step(s: Arc<dyn Store>) {
    start(&*s, wf("w", "A", "q"), T).await;
    let epoch = claim_one(&*s, "k", "A", "w", T + 1).await;
    // Retries of one request race each other (same outcome), and two diverging writers race
    // (a different outcome per task): per position exactly one write lands, the identical
    // retries are acknowledged, and the diverging ones are conflicts.
    let mut tasks = Vec::new();
    for task in 0..6u32 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for pos in 0..10u32 {
                let output = if pos % 2 == 0 {
                    "\"same\"".to_string()
                } else {
                    format!("{task}")
                };
                let r = s.record_step(&fence("w", epoch), step(pos, "s", &output), T + 2).await;
                results.push((pos, r));
            }
            results
        }));
    }
    let mut new = [0u32; 10];
    for t in tasks {
        for (pos, r) in t.await.unwrap() {
            match r {
                Ok(Recorded::New) => new[pos as usize] += 1,
                Ok(Recorded::AlreadyRecorded) => assert_eq!(pos % 2, 0, "step {pos}"),
                Err(StoreError::StepConflict { step_id, .. }) => {
                    assert_eq!((step_id, pos % 2), (pos, 1), "step {pos}")
                }
                other => panic!("step {pos}: unexpected {other:?}"),
            }
        }
    }
    assert_eq!(new, [1; 10], "one write per position");
    assert_eq!(s.list_steps("w").await.unwrap().len(), 10);
}

pub async fn fenced_writes_race_redispatch(s: Arc<dyn Store>) {
    const WRITERS: u32 = 4;
    start(&*s, wf("w", "A", "q"), T).await;
    claim_one(&*s, "A", "A", "w", T + 1).await;
    // Worker A checkpoints from several tasks as fast as it can while the workflow is taken
    // from it and handed to B. The dispatch B receives must hold every step A managed to
    // write: a write landing after the epoch bump is a checkpoint B would replay past blindly.
    // (A race, so a broken fence is caught often rather than always.)
    let (warm, warmed) = tokio::sync::mpsc::channel(WRITERS as usize);
    let mut writers = Vec::new();
    for k in 0..WRITERS {
        let (s, warm) = (s.clone(), warm.clone());
        writers.push(tokio::spawn(async move {
            let mut i = k;
            for _ in 0..100_000 {
                match s.record_step(&fence("w", 1), step(i, "a", "1"), T + 2).await {
                    Ok(Recorded::New) => i += WRITERS,
                    // Back in the queue: keep trying, so writes are in flight during the claim.
                    Err(StoreError::NotRunning { .. }) => tokio::task::yield_now().await,
                    Err(StoreError::StaleEpoch { .. }) => return,
                    other => panic!("step {i}: unexpected {other:?}"),
                }
                if i == k + 5 * WRITERS {
                    let _ = warm.send(()).await;
                }
            }
            panic!("A was never fenced off");
        }));
    }
    let mut warmed = warmed;
    for _ in 0..WRITERS {
        warmed.recv().await.expect("A wrote its first steps");
    }
    s.release_worker("A", 5, T + 3).await.unwrap();
    // A claim skips rows another transaction holds locked; one of A's in-flight writes may
    // hold the row for a moment (it locks, re-checks, and finds the workflow requeued), so B
    // tries again, as the dispatcher's next pass would.
    let mut got = Vec::new();
    for _ in 0..10_000 {
        got = s.claim_workflows(&claim("B", &["A"], &["q"], 1), T + 4).await.unwrap();
        if !got.is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(ids(&got), ["w"]);
    assert_eq!(got[0].workflow.epoch, 2);
    let seen: Vec<u32> = got[0].steps.iter().map(|s| s.step_id).collect();
    let stored: Vec<u32> = s.list_steps("w").await.unwrap().iter().map(|s| s.step_id).collect();
    assert!(seen.len() >= 5 * WRITERS as usize);
    assert_eq!(stored, seen, "a stale write landed after the re-dispatch");
}

pub async fn completions_carry_their_last_steps(s: Arc<dyn Store>) {
    let s = &*s;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    for id in ["c1", "c2", "c3", "c4"] {
        start(s, wf(id, "W", "q"), T).await;
        claim_one(s, "A", "W", id, T).await;
    }
    let steps = || vec![step(0, "a", "1"), step(1, "b", "2")];
    // Steps and completion together.
    let done = s
        .complete_with_steps(&fence("c1", 1), steps(), Outcome::Output("3".into()), T + 1)
        .await
        .unwrap();
    assert_eq!((done.workflow.status, done.adopted), (WorkflowStatus::Success, false));
    let recorded = s.list_steps("c1").await.unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|r| (r.step_id, r.name.as_str(), r.epoch))
            .collect::<Vec<_>>(),
        [(0, "a", 1), (1, "b", 1)]
    );
    // A retried completion adopts the outcome and writes nothing.
    let again = s
        .complete_with_steps(&fence("c1", 1), steps(), Outcome::Output("other".into()), T + 2)
        .await
        .unwrap();
    assert_eq!(
        (again.adopted, again.workflow.outcome),
        (true, Some(Outcome::Output("3".into())))
    );
    // Some steps already recorded the same way: the rest go in and it completes.
    s.record_step(&fence("c2", 1), step(0, "a", "1"), T + 3).await.unwrap();
    let done = s
        .complete_with_steps(&fence("c2", 1), steps(), Outcome::Output("3".into()), T + 4)
        .await
        .unwrap();
    assert_eq!(done.workflow.status, WorkflowStatus::Success);
    assert_eq!(s.list_steps("c2").await.unwrap().len(), 2);
    // A step recorded differently is a conflict: nothing completes.
    s.record_step(&fence("c3", 1), step(0, "a", "9"), T + 5).await.unwrap();
    assert!(matches!(
        s.complete_with_steps(&fence("c3", 1), steps(), Outcome::Output("3".into()), T + 6)
            .await,
        Err(StoreError::StepConflict { .. })
    ));
    assert_eq!(get(s, "c3").await.status, WorkflowStatus::Pending);
    // A stale run writes neither its steps nor its completion.
    s.release_worker("A", 10, T + 7).await.unwrap();
    assert!(matches!(
        s.complete_with_steps(&fence("c4", 1), steps(), Outcome::Output("3".into()), T + 8)
            .await,
        Err(StoreError::StaleEpoch { .. }) | Err(StoreError::NotRunning { .. })
    ));
    assert!(s.list_steps("c4").await.unwrap().is_empty());
    assert_eq!(get(s, "c4").await.status, WorkflowStatus::Enqueued);
}

/// A step's start, where its worker told it, is kept with it — recorded alone, or in one batch
/// with the completion — read back with the steps and copied by a fork; a second report of the
/// step that differs only in its start is the same step.
pub async fn a_steps_start_is_kept_where_known(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("st", "A", "q"), T).await;
    let e = claim_one(s, "k", "A", "st", T + 1).await;
    let f = fence("st", e);
    let timed = NewStep {
        started_at: Some(T + 2),
        ..step(0, "fetch", "1")
    };
    assert_eq!(s.record_step(&f, timed.clone(), T + 9).await.unwrap(), Recorded::New);
    let again = NewStep {
        started_at: Some(T + 5),
        ..timed
    };
    assert_eq!(
        s.record_step(&f, again, T + 10).await.unwrap(),
        Recorded::AlreadyRecorded
    );
    s.record_step(&f, step(1, "untimed", "2"), T + 11).await.unwrap();
    let last = NewStep {
        started_at: Some(T + 12),
        ..step(2, "last", "3")
    };
    s.complete_with_steps(&f, vec![last], Outcome::Output("3".into()), T + 14)
        .await
        .unwrap();
    let starts = |steps: Vec<StepRecord>| -> Vec<(u32, Option<Millis>)> {
        steps.iter().map(|x| (x.step_id, x.started_at)).collect()
    };
    assert_eq!(
        starts(s.list_steps("st").await.unwrap()),
        [(0, Some(T + 2)), (1, None), (2, Some(T + 12))]
    );
    s.fork_workflow(&super::lifecycle::fork("st", Some(2), "st-fork"), T + 20)
        .await
        .unwrap();
    assert_eq!(
        starts(s.list_steps("st-fork").await.unwrap()),
        [(0, Some(T + 2)), (1, None)]
    );
}
