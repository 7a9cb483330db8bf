//! Remote step cases: calls queued once, attempts claimed once, retried with backoff, timed
//! out, fenced by attempt, and recorded as the caller's step; "wait for the first of".

use super::*;

fn policy(max_attempts: u32) -> StepPolicy {
    StepPolicy {
        max_attempts,
        initial_backoff_ms: 100,
        backoff_coefficient: 2.0,
        max_backoff_ms: 10_000,
        timeout_ms: 1_000,
    }
}

fn call(name: &str, input: &str, max_attempts: u32) -> NewStepTask {
    NewStepTask {
        step_name: name.to_string(),
        input: input.to_string(),
        policy: policy(max_attempts),
        trace: None,
    }
}

fn step_claim(worker: &str, names: &[&str], limit: u32) -> StepClaim {
    StepClaim {
        worker_id: worker.to_string(),
        session_id: session(worker),
        step_names: names.iter().map(|s| s.to_string()).collect(),
        limit,
    }
}

/// Attempt `attempt` of the call at `step_id`, reported by worker B's stream (which claims the
/// calls in these cases).
fn attempt(id: &str, step_id: u32, attempt: u32) -> StepAttempt {
    attempt_from("B", id, step_id, attempt)
}

fn attempt_from(worker: &str, id: &str, step_id: u32, attempt: u32) -> StepAttempt {
    StepAttempt {
        workflow_id: id.to_string(),
        step_id,
        attempt,
        session_id: session(worker),
    }
}

/// A running caller `id` (workflow "P", epoch 1) and live leases for workers A and B.
async fn running_caller(s: &dyn Store, id: &str) -> Fence {
    start(s, wf(id, "P", "q"), T).await;
    for w in ["A", "B"] {
        s.renew_session_lease(&session(w), w, T + 3_600_000, T).await.unwrap();
    }
    fence(id, claim_one(s, "A", "P", id, T).await)
}

pub async fn remote_step_calls_queue_once_and_record_their_result(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running_caller(s, "caller").await;
    assert_eq!(s.call_step(&f, 0, &call("double", "21", 1), T + 1).await.unwrap(), None);
    assert_eq!(
        s.call_step(&f, 0, &call("double", "21", 1), T + 2).await.unwrap(),
        None,
        "asking again is not a second call"
    );
    assert!(matches!(
        s.call_step(&f, 0, &call("triple", "21", 1), T + 2).await,
        Err(StoreError::NonDeterminism { .. })
    ));
    // Only a worker that runs the step gets it, and only once.
    assert!(s
        .claim_step_tasks(&step_claim("B", &["other"], 10), T + 3)
        .await
        .unwrap()
        .is_empty());
    let got = s
        .claim_step_tasks(&step_claim("B", &["double"], 10), T + 3)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let t = &got[0];
    assert_eq!(
        (
            t.workflow_id.as_str(),
            t.step_id,
            t.step_name.as_str(),
            t.input.as_str(),
            t.attempt,
            t.deadline_at
        ),
        ("caller", 0, "double", "21", 1, T + 3 + 1_000)
    );
    assert!(s
        .claim_step_tasks(&step_claim("B", &["double"], 10), T + 4)
        .await
        .unwrap()
        .is_empty());
    // Another stream (worker A's, which holds the caller) cannot answer for B's attempt, whatever
    // the attempt number: nothing is written and the attempt stays B's.
    for n in [0, 1, 2] {
        assert!(
            matches!(
                s.finish_step_task(
                    &attempt_from("A", "caller", 0, n),
                    Outcome::Output("forged".into()),
                    T + 4
                )
                .await,
                Err(StoreError::StepAttemptStale { .. })
            ),
            "attempt {n} from A"
        );
    }
    assert!(s.steps_recorded(&[("caller".into(), 0)]).await.unwrap().is_empty());
    // The caller is recovered while the step runs: the result lands under its new epoch.
    s.release_worker("A", 10, T + 5).await.unwrap();
    let f2 = fence("caller", claim_one(s, "A", "P", "caller", T + 6).await);
    assert!(s.steps_recorded(&[("caller".into(), 0)]).await.unwrap().is_empty());
    assert_eq!(
        s.finish_step_task(&attempt("caller", 0, 1), Outcome::Output("42".into()), T + 7)
            .await
            .unwrap(),
        StepFinished::Recorded
    );
    assert_eq!(
        s.steps_recorded(&[("caller".into(), 0), ("caller".into(), 1)])
            .await
            .unwrap(),
        [("caller".to_string(), 0)]
    );
    let rec = s
        .call_step(&f2, 0, &call("double", "21", 1), T + 8)
        .await
        .unwrap()
        .expect("recorded");
    assert_eq!(
        (rec.name.as_str(), &rec.outcome, rec.attempts, rec.epoch),
        ("double", &Outcome::Output("42".into()), 1, f2.epoch)
    );
    // A second result for the same attempt is refused and changes nothing.
    assert!(matches!(
        s.finish_step_task(&attempt("caller", 0, 1), Outcome::Output("0".into()), T + 9)
            .await,
        Err(StoreError::StepAttemptStale { .. })
    ));
    assert!(matches!(
        s.finish_step_task(&attempt("caller", 5, 1), Outcome::Output("0".into()), T + 9)
            .await,
        Err(StoreError::StepAttemptStale { .. })
    ));
    let recorded = &s.list_steps("caller").await.unwrap()[0];
    assert_eq!(recorded.outcome, Outcome::Output("42".into()));
    // A remote step began when it was called (the first call: a repeated one is the same step).
    assert_eq!(recorded.started_at, Some(T + 1));
    // The old run's call is fenced.
    assert!(matches!(
        s.call_step(&f, 1, &call("double", "1", 1), T + 10).await,
        Err(StoreError::StaleEpoch { .. })
    ));
}

pub async fn remote_step_failures_retry_with_backoff_then_record(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running_caller(s, "caller").await;
    s.call_step(&f, 0, &call("flaky", "1", 2), T).await.unwrap();
    let t1 = T + 10;
    assert_eq!(
        s.claim_step_tasks(&step_claim("B", &["flaky"], 1), t1).await.unwrap()[0].attempt,
        1
    );
    assert_eq!(
        s.finish_step_task(&attempt("caller", 0, 1), failure("Boom"), t1 + 1)
            .await
            .unwrap(),
        StepFinished::Retrying { at: t1 + 1 + 100 }
    );
    assert!(s.steps_recorded(&[("caller".into(), 0)]).await.unwrap().is_empty());
    assert!(
        s.claim_step_tasks(&step_claim("B", &["flaky"], 1), t1 + 50)
            .await
            .unwrap()
            .is_empty(),
        "not before its backoff"
    );
    let again = s
        .claim_step_tasks(&step_claim("B", &["flaky"], 1), t1 + 101)
        .await
        .unwrap();
    assert_eq!(again[0].attempt, 2);
    assert_eq!(
        s.finish_step_task(&attempt("caller", 0, 2), failure("Boom"), t1 + 200)
            .await
            .unwrap(),
        StepFinished::Recorded,
        "out of attempts: the failure is the result"
    );
    let rec = s
        .call_step(&f, 0, &call("flaky", "1", 2), t1 + 300)
        .await
        .unwrap()
        .expect("recorded");
    assert_eq!((rec.outcome, rec.attempts), (failure("Boom"), 2));
}

pub async fn remote_step_attempts_time_out_and_parked_callers_wake(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running_caller(s, "caller").await;
    s.call_step(&f, 0, &call("slow", "1", 3), T).await.unwrap();
    s.claim_step_tasks(&step_claim("B", &["slow"], 1), T).await.unwrap();
    assert_eq!(s.expire_step_tasks(T + 500).await.unwrap(), ExpiredSteps::default());
    let expired = s.expire_step_tasks(T + 1_001).await.unwrap();
    assert_eq!((expired.recorded.len(), expired.retrying), (0, vec![T + 1_001 + 100]));
    // The timed-out attempt's late result is refused.
    assert!(matches!(
        s.finish_step_task(&attempt("caller", 0, 1), Outcome::Output("1".into()), T + 1_050)
            .await,
        Err(StoreError::StepAttemptStale { .. })
    ));
    assert_eq!(
        s.claim_step_tasks(&step_claim("B", &["slow"], 1), T + 1_200)
            .await
            .unwrap()[0]
            .attempt,
        2
    );
    // The caller parks on the result, then worker B's lease ends: attempt 2 fails as lost.
    assert!(s
        .park(&f, 0, T + 3_600_000, &ParkedOn::Step(0), T + 1_300)
        .await
        .unwrap());
    s.renew_session_lease(&session("B"), "B", T + 1_400, T + 1_300)
        .await
        .unwrap();
    let expired = s.expire_step_tasks(T + 1_500).await.unwrap();
    assert_eq!(expired.retrying, vec![T + 1_500 + 200]);
    assert_eq!(
        s.claim_step_tasks(&step_claim("A", &["slow"], 1), T + 1_700)
            .await
            .unwrap()[0]
            .attempt,
        3
    );
    let expired = s.expire_step_tasks(T + 2_701).await.unwrap();
    assert_eq!(expired.recorded, [("caller".to_string(), 0)]);
    let rec = &s.list_steps("caller").await.unwrap()[0];
    assert!(
        matches!(&rec.outcome, Outcome::Failure(f) if f.kind == STEP_TIMED_OUT),
        "{rec:?}"
    );
    assert_eq!(
        get(s, "caller").await.status,
        WorkflowStatus::Enqueued,
        "the parked caller woke"
    );
    // A parked workflow whose step is already recorded does not park.
    let f2 = fence("caller", claim_one(s, "A", "P", "caller", T + 2_800).await);
    assert!(!s
        .park(&f2, 0, T + 3_600_000, &ParkedOn::Step(0), T + 2_900)
        .await
        .unwrap());
    // Calls of a finished workflow are dropped, not dispatched.
    s.call_step(&f2, 1, &call("slow", "1", 3), T + 3_000).await.unwrap();
    s.cancel_workflow("caller", T + 3_100).await.unwrap();
    assert!(s
        .claim_step_tasks(&step_claim("A", &["slow"], 1), T + 3_200)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.expire_step_tasks(T + 3_300).await.unwrap(), ExpiredSteps::default());
}

pub async fn concurrent_step_claims_take_each_call_once(s: Arc<dyn Store>) {
    let f = running_caller(&*s, "caller").await;
    for i in 0..60 {
        s.call_step(&f, i, &call("work", "1", 1), T).await.unwrap();
    }
    let mut claimers = Vec::new();
    for w in ["A", "B", "A", "B"] {
        let s = s.clone();
        claimers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = s.claim_step_tasks(&step_claim(w, &["work"], 7), T + 1).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|t| t.step_id));
            }
        }));
    }
    let mut all = Vec::new();
    for c in claimers {
        all.extend(c.await.unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (0..60).collect::<Vec<_>>(), "every call claimed exactly once");
}

pub async fn select_records_the_first_to_finish(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running_caller(s, "parent").await;
    // The children started as the parent's steps 0 and 1, as the engine starts them.
    let mut tx = s.begin(T + 1).await.unwrap();
    tx.fence(&f, 0, FenceLock::Shared).await.unwrap();
    for (step, id) in [(0, "parent/a"), (1, "parent/b")] {
        let child = NewWorkflow {
            input: "1".into(),
            ..wf(id, "C", "q")
        };
        assert!(tx.insert_child("parent", &child).await.unwrap());
        let started = waymark_store::recorded::child_started_output(id);
        assert!(tx.record_step(&f, step, START_CHILD_STEP, &started).await.unwrap());
    }
    tx.commit(Vec::new()).await.unwrap();
    s.call_step(&f, 2, &call("double", "1", 1), T + 2).await.unwrap();
    let targets = [
        WaitTarget::Workflow("parent/a".into()),
        WaitTarget::Workflow("parent/b".into()),
        WaitTarget::Step(2),
    ];
    assert_eq!(
        s.select_step(&f, 3, &targets, WaitFor::First, T + 3).await.unwrap(),
        None
    );
    // The remote step finishes first, then child b; by the time the parent looks, both are done.
    s.claim_step_tasks(&step_claim("B", &["double"], 1), T + 4)
        .await
        .unwrap();
    s.finish_step_task(&attempt("parent", 2, 1), Outcome::Output("2".into()), T + 5)
        .await
        .unwrap();
    claim_one(s, "B", "C", "parent/a", T + 6).await;
    let b = s.claim_workflows(&claim("B", &["C"], &["q"], 1), T + 6).await.unwrap();
    assert_eq!(ids(&b), ["parent/b"]);
    s.complete_workflow(&fence("parent/b", 1), Outcome::Output("1".into()), T + 7)
        .await
        .unwrap();
    assert_eq!(
        s.select_step(&f, 3, &targets, WaitFor::First, T + 8).await.unwrap(),
        Some(2)
    );
    let recorded = &s.list_steps("parent").await.unwrap()[3];
    assert_eq!((recorded.step_id, recorded.name.as_str()), (3, SELECT_STEP));
    // A replay gets the recorded winner even though more has finished since.
    s.complete_workflow(&fence("parent/a", 1), Outcome::Output("1".into()), T + 9)
        .await
        .unwrap();
    let reversed = [WaitTarget::Workflow("parent/a".into()), WaitTarget::Step(2)];
    assert_eq!(
        s.select_step(&f, 3, &reversed, WaitFor::First, T + 10).await.unwrap(),
        Some(2)
    );
    // Waiting for all: only once every target is done, and the last to finish is recorded.
    let all = [
        WaitTarget::Step(2),
        WaitTarget::Workflow("parent/a".into()),
        WaitTarget::Workflow("parent/b".into()),
    ];
    assert_eq!(s.select_step(&f, 5, &all, WaitFor::All, T + 12).await.unwrap(), Some(1));
    assert!(matches!(
        s.select_step(&f, 5, &all, WaitFor::First, T + 13).await,
        Err(StoreError::NonDeterminism { .. })
    ));
    // Waiting on a workflow that does not exist is an error, not an endless wait.
    assert!(matches!(
        s.select_step(&f, 4, &[WaitTarget::Workflow("nobody".into())], WaitFor::First, T + 11)
            .await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}
