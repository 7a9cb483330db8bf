//! Flow-control cases: a queue's limits hold across claimers (global, per worker, rate,
//! partitions in turn); the plain claim and direct dispatch leave limited queues alone; dedup
//! ids; delayed starts that can be moved; debounce.

use super::*;

async fn limited(s: &dyn Store, name: &str, limits: QueueLimits) {
    s.create_queue(name, &limits, T).await.unwrap();
}

async fn enqueue(s: &dyn Store, queue: &str, ids: &[String], partition: &str, now: Millis) {
    for (i, id) in ids.iter().enumerate() {
        let new = NewWorkflow {
            partition_key: partition.to_string(),
            ..wf(id, "L", queue)
        };
        start(s, new, now + i as Millis).await;
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:03}")).collect()
}

async fn take(s: &dyn Store, worker: &str, queue: &str, limit: u32, now: Millis) -> Vec<WorkflowRecord> {
    let got = s
        .claim_limited(queue, &claim(worker, &["L"], &[queue], limit), now)
        .await
        .expect("limited claim");
    for c in &got {
        assert_eq!(
            (c.workflow.status, c.workflow.worker_id.as_deref()),
            (WorkflowStatus::Pending, Some(worker))
        );
        assert!(c.workflow.started_at.is_some_and(|t| t <= now));
    }
    got.into_iter().map(|c| c.workflow).collect()
}

async fn finish(s: &dyn Store, w: &WorkflowRecord, now: Millis) {
    s.complete_workflow(&fence(&w.workflow_id, w.epoch), Outcome::Output("1".into()), now)
        .await
        .unwrap();
}

pub async fn limited_claims_keep_global_and_worker_concurrency(s: Arc<dyn Store>) {
    let s = &*s;
    let limits = QueueLimits {
        worker_concurrency: Some(2),
        global_concurrency: Some(3),
        ..Default::default()
    };
    limited(s, "lq", limits).await;
    enqueue(s, "lq", &names("w", 10), "", T).await;
    // The plain claim leaves a limited queue alone.
    assert!(s
        .claim_workflows(&claim("A", &["L"], &["lq"], 10), T + 20)
        .await
        .unwrap()
        .is_empty());
    let a = take(s, "A", "lq", 10, T + 21).await;
    assert_eq!(a.len(), 2, "worker concurrency");
    assert_eq!(a[0].workflow_id, "w000", "oldest first");
    let b = take(s, "B", "lq", 10, T + 22).await;
    assert_eq!(b.len(), 1, "global concurrency");
    assert!(take(s, "C", "lq", 10, T + 23).await.is_empty());
    assert!(take(s, "A", "lq", 10, T + 24).await.is_empty());
    finish(s, &a[0], T + 25).await;
    let c = take(s, "C", "lq", 10, T + 26).await;
    assert_eq!(c.len(), 1);
    // Raising the limit lets more through; removing every limit hands it to the plain claim.
    let raise = QueueUpdate {
        global_concurrency: Some(Some(5)),
        ..Default::default()
    };
    s.update_queue("lq", &raise, T + 27).await.unwrap();
    assert_eq!(
        take(s, "C", "lq", 10, T + 28).await.len(),
        1,
        "C reaches its worker limit"
    );
    assert_eq!(take(s, "D", "lq", 10, T + 29).await.len(), 1);
    let clear = QueueUpdate {
        global_concurrency: Some(None),
        worker_concurrency: Some(None),
        ..Default::default()
    };
    s.update_queue("lq", &clear, T + 30).await.unwrap();
    let plain = s
        .claim_workflows(&claim("A", &["L"], &["lq"], 10), T + 31)
        .await
        .unwrap();
    assert_eq!(plain.len(), 4, "the rest of the ten");
}

pub async fn rate_limits_count_starts_in_a_sliding_window(s: Arc<dyn Store>) {
    let s = &*s;
    let limits = QueueLimits {
        rate_limit: Some(RateLimit {
            max_starts: 3,
            period_ms: 1_000,
        }),
        ..Default::default()
    };
    limited(s, "rq", limits).await;
    enqueue(s, "rq", &names("r", 10), "", T).await;
    let first = take(s, "A", "rq", 10, T + 100).await;
    assert_eq!(first.len(), 3);
    for w in &first {
        finish(s, w, T + 200).await;
    }
    // Finished or not, those starts fill the window until it slides past them.
    assert!(take(s, "A", "rq", 10, T + 600).await.is_empty());
    assert!(take(s, "A", "rq", 10, T + 1_099).await.is_empty());
    let second = take(s, "B", "rq", 10, T + 1_101).await;
    assert_eq!(second.len(), 3);
    assert!(take(s, "B", "rq", 10, T + 1_500).await.is_empty());
    // A recovered workflow was started before: it is not a new start and goes out at once.
    s.renew_session_lease(&session("B"), "B", T + 1_600, T + 1_101)
        .await
        .unwrap();
    assert_eq!(s.recover_expired(5, T + 1_700).await.unwrap().requeued.len(), 3);
    let again = take(s, "C", "rq", 10, T + 1_800).await;
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|w| w.epoch == 2));
}

pub async fn partitions_run_within_their_limit_and_take_turns(s: Arc<dyn Store>) {
    let s = &*s;
    let limits = QueueLimits {
        partition_concurrency: Some(2),
        global_concurrency: Some(3),
        ..Default::default()
    };
    limited(s, "pq", limits).await;
    enqueue(s, "pq", &names("big", 60), "big", T).await;
    enqueue(s, "pq", &names("small", 4), "small", T + 100).await;
    // Both partitions get a share of the first claim, the big one no more than two.
    let first = take(s, "A", "pq", 10, T + 200).await;
    assert_eq!(first.len(), 3);
    let count = |ws: &[WorkflowRecord], p: &str| ws.iter().filter(|w| w.partition_key == p).count();
    assert!(count(&first, "big") <= 2 && count(&first, "small") >= 1, "{first:?}");
    // One slot at a time from now on: the small partition is not starved by the big one's
    // older backlog; it drains within a few rounds.
    let mut running = first;
    let mut small_done = 0;
    let mut rounds = 0;
    while small_done < 4 {
        rounds += 1;
        assert!(rounds <= 12, "the small partition is starved: {small_done} of 4 done");
        let now = T + 300 + rounds * 10;
        let w = running.remove(0);
        small_done += (w.partition_key == "small") as usize;
        finish(s, &w, now).await;
        let got = take(s, "A", "pq", 10, now + 1).await;
        assert!(got.len() <= 1, "one slot was freed");
        running.extend(got);
        assert!(
            count(&running, "big") <= 2 && count(&running, "small") <= 2,
            "partition limit: {running:?}"
        );
    }
}

pub async fn direct_dispatch_leaves_limited_queues_to_their_claim(s: Arc<dyn Store>) {
    let s = &*s;
    let limits = QueueLimits {
        global_concurrency: Some(1),
        ..Default::default()
    };
    limited(s, "dq", limits).await;
    let new = NewWorkflow {
        assign: Some(Assignment {
            worker_id: "A".into(),
            session_id: session("A"),
            app_version: V1.into(),
        }),
        ..wf("direct", "L", "dq")
    };
    let w = start(s, new, T).await;
    assert_eq!((w.status, w.epoch, w.worker_id), (WorkflowStatus::Enqueued, 0, None));
    assert_eq!(w.app_version, None, "not pinned by a dispatch that did not happen");
    assert_eq!(take(s, "A", "dq", 5, T + 1).await.len(), 1);
}

pub async fn dedup_ids_are_unique_among_a_queues_live_workflows(s: Arc<dyn Store>) {
    let s = &*s;
    let with = |id: &str, queue: &str| NewWorkflow {
        dedup_id: Some("order-7".into()),
        ..wf(id, "L", queue)
    };
    let holder = start(s, with("d1", "q"), T).await;
    assert_eq!(holder.dedup_id.as_deref(), Some("order-7"));
    match s.start_workflow(with("d2", "q"), T + 1).await {
        Err(StoreError::Duplicate { dedup_id, holder }) => {
            assert_eq!((dedup_id.as_str(), holder.as_str()), ("order-7", "d1"))
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    let returned = s
        .start_workflow(
            NewWorkflow {
                return_existing: true,
                ..with("d2", "q")
            },
            T + 2,
        )
        .await
        .unwrap();
    assert_eq!(
        (returned.workflow.workflow_id.as_str(), returned.created),
        ("d1", false)
    );
    // Retrying the holder's own start is the usual idempotent answer.
    assert!(!s.start_workflow(with("d1", "q"), T + 3).await.unwrap().created);
    // Another queue has its own ids.
    start(s, with("other", "q2"), T + 4).await;
    assert!(
        s.get_workflow("d2").await.unwrap().is_none(),
        "nothing was inserted for d2"
    );
    // Once the holder is done, the id is free again.
    let epoch = claim_one(s, "A", "L", "d1", T + 5).await;
    let done = fence("d1", epoch);
    s.complete_workflow(&done, Outcome::Output("1".into()), T + 6)
        .await
        .unwrap();
    assert!(s.start_workflow(with("d2", "q"), T + 7).await.unwrap().created);
}

pub async fn delayed_starts_wait_and_can_be_moved(s: Arc<dyn Store>) {
    let s = &*s;
    let new = NewWorkflow {
        run_at: Some(T + 1_000),
        ..wf("later", "L", "q")
    };
    let w = start(s, new, T).await;
    assert_eq!((w.status, w.wake_at), (WorkflowStatus::Delayed, Some(T + 1_000)));
    assert!(s
        .claim_workflows(&claim("A", &["L"], &["q"], 5), T + 1)
        .await
        .unwrap()
        .is_empty());
    let moved = s.set_start_time("later", T + 500, T + 2).await.unwrap();
    assert_eq!(moved.wake_at, Some(T + 500));
    assert_eq!(s.wake_due(T + 499).await.unwrap(), 0);
    assert_eq!(s.wake_due(T + 500).await.unwrap(), 1);
    claim_one(s, "A", "L", "later", T + 501).await;
    assert!(matches!(
        s.set_start_time("later", T + 900, T + 502).await,
        Err(StoreError::NotDelayed {
            status: WorkflowStatus::Pending,
            ..
        })
    ));
    assert!(matches!(
        s.set_start_time("nobody", T + 900, T + 502).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

pub async fn debounced_starts_collapse_onto_one_delayed_workflow(s: Arc<dyn Store>) {
    let s = &*s;
    let bounce = |id: &str, input: &str, run_at: Millis| NewWorkflow {
        input: input.to_string(),
        run_at: Some(run_at),
        debounce: Some(Debounce {
            key: "user-1".into(),
            until: run_at + 1_000,
        }),
        ..wf(id, "L", "q")
    };
    let first = s.start_workflow(bounce("b1", "1", T + 100), T).await.unwrap();
    assert!(first.created);
    let second = s.start_workflow(bounce("b2", "2", T + 150), T + 50).await.unwrap();
    assert_eq!(
        (
            second.workflow.workflow_id.as_str(),
            second.created,
            second.workflow.input.as_str()
        ),
        ("b1", false, "2")
    );
    assert_eq!(second.workflow.wake_at, Some(T + 150));
    // A steady stream cannot put it off past the first start's cap.
    let late = s.start_workflow(bounce("b3", "3", T + 5_000), T + 140).await.unwrap();
    assert_eq!(
        (late.workflow.workflow_id.as_str(), late.workflow.wake_at),
        ("b1", Some(T + 1_100))
    );
    assert!(s.get_workflow("b2").await.unwrap().is_none());
    assert_eq!(s.wake_due(T + 1_100).await.unwrap(), 1);
    let w = get(s, "b1").await;
    assert_eq!((w.status, w.input.as_str()), (WorkflowStatus::Enqueued, "3"));
    // Once it is on its way, the key starts a new one.
    let next = s.start_workflow(bounce("b4", "4", T + 2_000), T + 1_200).await.unwrap();
    assert_eq!((next.workflow.workflow_id.as_str(), next.created), ("b4", true));
}
