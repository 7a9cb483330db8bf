//! What operators read back from the store: the trace context a workflow and a remote-step call
//! were started with (handed to every dispatch), what a parked workflow waits on, how much work
//! each queue holds, and whether the schema is up to date.

use super::*;

fn trace(span: &str) -> TraceContext {
    TraceContext {
        traceparent: format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01"),
        tracestate: "vendor=1".into(),
    }
}

pub async fn trace_context_travels_with_the_work(s: Arc<dyn Store>) {
    let s = &*s;
    let traced = NewWorkflow {
        trace: Some(trace("00f067aa0ba902b7")),
        ..wf("t1", "T", "q")
    };
    assert_eq!(start(s, traced, T).await.trace, Some(trace("00f067aa0ba902b7")));
    assert_eq!(
        start(s, wf("t0", "T", "q"), T).await.trace,
        None,
        "none given, none kept"
    );
    // A context without tracestate reads back with an empty one.
    let bare = TraceContext {
        tracestate: String::new(),
        ..trace("1111111111111111")
    };
    let plain = NewWorkflow {
        trace: Some(bare.clone()),
        ..wf("t2", "U", "q")
    };
    start(s, plain, T).await;
    assert_eq!(get(s, "t2").await.trace, Some(bare));

    // Every dispatch carries it.
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    let got = s.claim_workflows(&claim("A", &["T"], &["q"], 10), T + 1).await.unwrap();
    let mut traces: Vec<_> = got
        .iter()
        .map(|c| (c.workflow.workflow_id.as_str(), c.workflow.trace.clone()))
        .collect();
    traces.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(traces, [("t0", None), ("t1", Some(trace("00f067aa0ba902b7")))]);

    // A child keeps the span its parent started it from.
    let child = NewWorkflow {
        trace: Some(trace("2222222222222222")),
        ..wf("t1/0", "C", "q")
    };
    let mut tx = s.begin(T + 2).await.unwrap();
    assert!(tx.insert_child("t1", &child).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    assert_eq!(get(s, "t1/0").await.trace, Some(trace("2222222222222222")));

    // A remote-step call keeps its calling span for every attempt.
    let epoch = get(s, "t1").await.epoch;
    let call = NewStepTask {
        step_name: "remote".into(),
        input: "1".into(),
        policy: StepPolicy {
            max_attempts: 2,
            initial_backoff_ms: 0,
            backoff_coefficient: 2.0,
            max_backoff_ms: 0,
            timeout_ms: 1_000,
        },
        trace: Some(trace("3333333333333333")),
    };
    assert!(s
        .call_step(&fence("t1", epoch), 1, &call, T + 3)
        .await
        .unwrap()
        .is_none());
    let claim = StepClaim {
        worker_id: "B".into(),
        session_id: session("B"),
        step_names: vec!["remote".into()],
        limit: 1,
    };
    s.renew_session_lease(&session("B"), "B", T + 60_000, T).await.unwrap();
    let attempts = s.claim_step_tasks(&claim, T + 4).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].trace, Some(trace("3333333333333333")));
}

pub async fn a_parked_workflow_says_what_it_waits_on(s: Arc<dyn Store>) {
    let s = &*s;
    for (id, on) in [
        ("p1", ParkedOn::Message("orders".into())),
        (
            "p2",
            ParkedOn::Event {
                workflow_id: "other".into(),
                key: "ready".into(),
            },
        ),
        ("p3", ParkedOn::Workflow("p3/0".into())),
        ("p4", ParkedOn::Step(4)),
        ("p5", ParkedOn::Timer),
    ] {
        start(s, wf(id, "K", "q"), T).await;
        if let ParkedOn::Workflow(child) = &on {
            start(s, wf(child, "C", "q"), T).await;
        }
        s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
        let epoch = claim_one(s, "A", "K", id, T).await;
        assert_eq!(get(s, id).await.parked_on, None, "running: parked on nothing");
        assert!(s.park(&fence(id, epoch), 1, T + 10_000, &on, T + 1).await.unwrap());
        let w = get(s, id).await;
        assert_eq!(
            (w.status, w.parked_on, w.wake_at),
            (WorkflowStatus::Delayed, Some(on), Some(T + 10_000))
        );
    }
}

pub async fn queues_are_counted_by_status(s: Arc<dyn Store>) {
    let s = &*s;
    assert_eq!(
        s.queue_counts(None).await.unwrap(),
        [],
        "nothing unfinished, nothing counted"
    );
    for (id, queue, partition) in [
        ("a1", "a", "p1"),
        ("a2", "a", "p2"),
        ("a3", "a", "p1"),
        ("a4", "a", ""),
        ("b1", "b", ""),
    ] {
        let new = NewWorkflow {
            partition_key: partition.into(),
            ..wf(id, "N", queue)
        };
        start(s, new, T + id.as_bytes()[1] as Millis).await;
    }
    let delayed = NewWorkflow {
        run_at: Some(T + 60_000),
        ..wf("b2", "N", "b")
    };
    start(s, delayed, T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    let got = s.claim_workflows(&claim("A", &["N"], &["b"], 1), T + 10).await.unwrap();
    assert_eq!(ids(&got), ["b1"]);
    // Finished work is not counted.
    start(s, wf("c1", "N", "c"), T).await;
    s.cancel_workflow("c1", T + 1).await.unwrap();

    let a = QueueCounts {
        queue_name: "a".into(),
        enqueued: 4,
        pending: 0,
        delayed: 0,
        oldest_enqueued_at: Some(T + b'1' as Millis),
        partitions: 2,
    };
    let b = QueueCounts {
        queue_name: "b".into(),
        enqueued: 0,
        pending: 1,
        delayed: 1,
        oldest_enqueued_at: None,
        partitions: 0,
    };
    assert_eq!(s.queue_counts(None).await.unwrap(), [a.clone(), b.clone()]);
    assert_eq!(s.queue_counts(Some("b")).await.unwrap(), [b]);
    assert_eq!(s.queue_counts(Some("c")).await.unwrap(), []);
}

pub async fn a_migrated_store_is_up_to_date(s: Arc<dyn Store>) {
    assert_eq!(s.pending_migrations().await.unwrap(), 0);
    let c = s.connections();
    assert!(c.open >= 1 && c.idle <= c.open, "{c:?}");
}

pub async fn live_worker_streams_are_listed_with_what_they_declared(s: Arc<dyn Store>) {
    let s = &*s;
    assert!(s.hold_worker_id("s-b", "B", None, T + 15_000, T).await.unwrap());
    assert!(s.hold_worker_id("s-a", "A", None, T + 15_000, T).await.unwrap());
    s.renew_session_lease("s-gone", "C", T + 5, T).await.unwrap();
    s.describe_session("s-a", r#"{"app":"shop"}"#).await.unwrap();
    s.heartbeat_session("s-a", "A", T + 20_000, r#"{"credits":3}"#, T + 1_000)
        .await
        .unwrap();
    // A plain renewal keeps the load the last heartbeat brought.
    s.renew_session_lease("s-a", "A", T + 21_000, T + 2_000).await.unwrap();
    let live = s.live_sessions(T + 10, 100).await.unwrap();
    assert_eq!(
        live,
        [
            SessionRecord {
                session_id: "s-a".into(),
                worker_id: "A".into(),
                info: Some(r#"{"app":"shop"}"#.into()),
                load: Some(r#"{"credits":3}"#.into()),
                lease_expires_at: T + 21_000,
                updated_at: T + 2_000,
            },
            SessionRecord {
                session_id: "s-b".into(),
                worker_id: "B".into(),
                info: None,
                load: None,
                lease_expires_at: T + 15_000,
                updated_at: T,
            },
        ],
        "by worker id; the expired stream is not listed"
    );
    assert_eq!(s.live_sessions(T + 10, 1).await.unwrap().len(), 1, "bounded");
    assert!(s.live_sessions(T + 30_000, 100).await.unwrap().is_empty());
}

pub async fn workflows_are_filtered_by_worker_version_and_parent_and_counted(s: Arc<dyn Store>) {
    let s = &*s;
    for (i, id) in ["f1", "f2", "f3", "f4"].into_iter().enumerate() {
        start(s, wf(id, "F", "q"), T + i as Millis).await;
    }
    let pinned = NewWorkflow {
        app_version: Some("v9".into()),
        ..wf("f5", "G", "q")
    };
    start(s, pinned, T + 5).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    s.renew_session_lease(&session("B"), "B", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "F", "f1", T + 10).await;
    claim_one(s, "B", "F", "f2", T + 11).await;
    let mut tx = s.begin(T + 12).await.unwrap();
    assert!(tx.insert_child("f1", &wf("f1/0", "C", "q")).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();

    let listed = |q: ListQuery| async move {
        let list = s
            .list_workflows(&ListQuery {
                limit: 100,
                ..q.clone()
            })
            .await
            .unwrap();
        let count = s.count_workflows(&q).await.unwrap();
        assert_eq!(count as usize, list.len(), "the count matches the listing");
        list.iter().map(|w| w.workflow_id.clone()).collect::<Vec<_>>()
    };
    let by_worker = ListQuery {
        worker_id: Some("A".into()),
        ..Default::default()
    };
    assert_eq!(listed(by_worker).await, ["f1"]);
    let by_version = ListQuery {
        app_version: Some("v9".into()),
        ..Default::default()
    };
    assert_eq!(listed(by_version).await, ["f5"]);
    let by_parent = ListQuery {
        parent_workflow_id: Some("f1".into()),
        ..Default::default()
    };
    assert_eq!(listed(by_parent).await, ["f1/0"]);
    assert_eq!(listed(ListQuery::default()).await.len(), 6);
    let enqueued_f = ListQuery {
        statuses: vec![WorkflowStatus::Enqueued],
        workflow_name: Some("F".into()),
        ..Default::default()
    };
    assert_eq!(listed(enqueued_f).await, ["f4", "f3"]);
    // The count ignores the page position and size.
    let paged = ListQuery {
        after: Some((T + 3, "f4".into())),
        limit: 1,
        ..Default::default()
    };
    assert_eq!(s.count_workflows(&paged).await.unwrap(), 6);
}
