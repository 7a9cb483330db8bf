//! A worker or client that means harm: forged writes for workflows another stream runs, a
//! stolen worker id, registrations without end, floods of requests, JSON nested without end,
//! messages to finished workflows. Each is refused with a stable reason and the server goes on
//! serving everyone else, logging no panic and no ERROR line: a peer's misbehaviour is not the
//! server's error.

use waymark_integration_tests::{
    fast_server, on_both_stores,
    raw_worker::{complete, RawWorker},
    workload::PATIENCE,
    Backend, ServerProcess,
};
use waymark_proto::v1::{self, reply, worker_message};
use waymark_sdk::{StartOptions, WorkflowStatus};

fn refusal(r: reply::Result) -> v1::ReplyError {
    match r {
        reply::Result::Error(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Another stream that knows (or guesses: it is 1 for most workflows) the epoch cannot record
/// steps for, or complete, a workflow it was not dispatched; the worker that holds it can.
async fn only_the_stream_holding_a_workflow_may_write_for_it(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &[]).await else {
        return;
    };
    let client = server.client().await;
    let mut owner = RawWorker::connect(&server.addr, "owner", &["target"]).await;
    owner
        .send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 }))
        .await;
    client
        .start_json("target", serde_json::json!({}), StartOptions::id("victim"))
        .await
        .unwrap();
    let d = owner.next_dispatch().await;
    assert_eq!(d.epoch, 1);

    // The impostor registers the same name, grants no credit and writes anyway.
    let mut impostor = RawWorker::connect(&server.addr, "impostor", &["target"]).await;
    let e = refusal(
        impostor
            .request(complete("victim", 1, serde_json::json!("forged")))
            .await,
    );
    assert_eq!(e.reason, "STALE_EPOCH", "{e:?}");
    let e = refusal(
        impostor
            .request(worker_message::Kind::RecordStep(v1::RecordStep {
                workflow_id: "victim".into(),
                epoch: 1,
                step_id: 0,
                name: "forged".into(),
                outcome: Some(v1::record_step::Outcome::Output(waymark_proto::json::to_payload(
                    &serde_json::json!(0),
                ))),
                attempts: 1,
                duration: None,
            }))
            .await,
    );
    assert_eq!(e.reason, "STALE_EPOCH", "{e:?}");
    assert!(
        client.steps("victim").await.unwrap().is_empty(),
        "nothing forged was recorded"
    );
    assert_eq!(client.get("victim").await.unwrap().status, WorkflowStatus::Pending);

    // The holder finishes it with its own output.
    let done = owner.request(complete("victim", 1, serde_json::json!("real"))).await;
    assert!(matches!(done, reply::Result::WorkflowCompleted(_)), "{done:?}");
    let w = client.await_workflow("victim", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!("real")));
    server.assert_log_clean(&[]);
}

/// A hello with the id of a worker whose stream is alive is refused: it would otherwise take
/// over that worker's workflows.
async fn a_live_workers_id_cannot_be_taken(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &[]).await else {
        return;
    };
    let _owner = RawWorker::connect(&server.addr, "shared-id", &["target"]).await;
    let refused = RawWorker::hello(&server.addr, RawWorker::hello_of("shared-id", &["target"]))
        .await
        .err()
        .expect("a second stream with a live worker's id is refused");
    assert_eq!(refused.code(), tonic::Code::AlreadyExists, "{refused:?}");
    assert!(refused.message().contains("another live stream"), "{refused:?}");
    server.assert_log_clean(&[]);
}

/// What one hello may register is bounded; the server is not made to persist 100,000 names.
async fn a_hello_registering_without_end_is_refused(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &[]).await else {
        return;
    };
    let mut hello = RawWorker::hello_of("greedy", &[]);
    hello.workflow_names = (0..100_000).map(|i| format!("name-{i}")).collect();
    let refused = RawWorker::hello(&server.addr, hello).await.err().expect("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let mut hello = RawWorker::hello_of("greedy", &["ok"]);
    hello.queues = (0..2_000).map(|i| format!("q-{i}")).collect();
    let refused = RawWorker::hello(&server.addr, hello).await.err().expect("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    // Nothing of it was kept: the names are unknown.
    let client = server.client().await;
    let e = client
        .start_json("name-7", serde_json::json!({}), StartOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.reason(), Some("WORKFLOW_NAME_UNKNOWN"), "{e:?}");
    server.assert_log_clean(&[]);
}

/// A flood of requests on one stream (50,000 in batches, far past the in-flight cap of 16 set
/// here) is answered in full, one by one, while other clients are served meanwhile.
async fn a_flood_on_one_stream_is_answered_without_starving_others(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &["--max-requests-per-stream", "16"]).await else {
        return;
    };
    let client = server.client().await;
    let mut flooder = RawWorker::connect(&server.addr, "flooder", &["target"]).await;
    const N: u64 = 50_000;
    let batch = |from: u64| {
        worker_message::Kind::Batch(v1::Batch {
            messages: (from..from + 1_000)
                .map(|i| v1::WorkerMessage {
                    request_id: i + 1,
                    kind: Some(worker_message::Kind::RecordStep(v1::RecordStep {
                        workflow_id: format!("nobody-{i}"),
                        epoch: 1,
                        step_id: 0,
                        name: "s".into(),
                        outcome: None,
                        attempts: 1,
                        duration: None,
                    })),
                })
                .collect(),
        })
    };
    // Written from one task, read from another: the server reads no faster than it answers.
    let tx = flooder.sender();
    let writer = tokio::spawn(async move {
        for from in (0..N).step_by(1_000) {
            let m = v1::WorkerMessage {
                request_id: 0,
                kind: Some(batch(from)),
            };
            tx.send(m).await.unwrap();
        }
    });
    let reading = tokio::spawn(async move {
        let mut refused = 0u64;
        while refused < N {
            if let v1::server_message::Kind::Reply(r) = flooder.next().await {
                assert!(matches!(r.result, Some(reply::Result::Error(_))), "{r:?}");
                refused += 1;
            }
        }
        refused
    });
    // Meanwhile the server answers another client.
    for i in 0..20 {
        let e = client.get(&format!("missing-{i}")).await.unwrap_err();
        assert_eq!(e.reason(), Some("WORKFLOW_NOT_FOUND"));
    }
    writer.await.unwrap();
    assert_eq!(reading.await.unwrap(), N, "every request was answered");
    server.assert_log_clean(&[]);
}

/// Input nested deeper than the limit is INVALID_ARGUMENT with a reason, not INTERNAL; a send to
/// a workflow that finished is FAILED_PRECONDITION.
async fn malformed_and_late_inputs_are_refused_clearly(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &[]).await else {
        return;
    };
    let client = server.client().await;
    let mut w = RawWorker::connect(&server.addr, "finisher", &["target"]).await;
    w.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 }))
        .await;
    let deep = (0..40).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
    let e = client
        .start_json("target", deep, StartOptions::id("deep"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e:?}");
    assert!(e.to_string().contains("deeper"), "{e}");

    client
        .start_json("target", serde_json::json!({}), StartOptions::id("finished"))
        .await
        .unwrap();
    let d = w.next_dispatch().await;
    let done = w.request(complete("finished", d.epoch, serde_json::json!(1))).await;
    assert!(matches!(done, reply::Result::WorkflowCompleted(_)), "{done:?}");
    let e = client
        .send_message("finished", "topic", &"late", None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::FailedPrecondition), "{e:?}");
    assert_eq!(e.reason(), Some("WORKFLOW_NOT_RUNNING"), "{e:?}");
    server.assert_log_clean(&[]);
}

/// A workflow whose history is past what a dispatch may carry fails with HISTORY_TOO_LARGE
/// when it would be dispatched again, instead of a dispatch that could never be delivered (which
/// ended the stream, came back on reconnect, and ended it again). Writes past the cap are
/// refused as they arrive (tests/bounds.rs); a history can still be found past it at dispatch
/// when it was recorded under a larger cap — here, through another replica.
async fn a_history_too_large_to_dispatch_fails_the_workflow(backend: Backend) {
    let Some((db, roomy)) = fast_server(backend, &[]).await else {
        return;
    };
    // The default lease: the raw worker there does not heartbeat, and must not go quiet.
    let tight = ServerProcess::start(&db, &["--max-history-bytes", "3000"].map(String::from)).await;
    let client = roomy.client().await;
    let mut w = RawWorker::connect(&roomy.addr, "hoarder", &["target"]).await;
    w.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 }))
        .await;
    client
        .start_json("target", serde_json::json!({}), StartOptions::id("hoard"))
        .await
        .unwrap();
    let d = w.next_dispatch().await;
    for step_id in 0..4 {
        let r = w
            .request(worker_message::Kind::RecordStep(v1::RecordStep {
                workflow_id: "hoard".into(),
                epoch: d.epoch,
                step_id,
                name: format!("s{step_id}"),
                outcome: Some(v1::record_step::Outcome::Output(waymark_proto::json::to_payload(
                    &serde_json::json!("x".repeat(1_000)),
                ))),
                attempts: 1,
                duration: None,
            }))
            .await;
        assert!(matches!(r, reply::Result::StepRecorded(_)), "{r:?}");
    }
    // The worker loses the run; the server takes it back, and the other replica's worker (the
    // first has no credit left) would get it.
    w.send(worker_message::Kind::Heartbeat(v1::Heartbeat {
        reports_held: true,
        held_workflow_ids: vec![],
        dispatches_received: 1,
    }))
    .await;
    let mut other = RawWorker::connect(&tight.addr, "other", &["target"]).await;
    other
        .send(worker_message::Kind::Credit(v1::Credit { workflows: 2, steps: 0 }))
        .await;
    let done = client.await_workflow("hoard", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Error, "{done:?}");
    let failure = done.failure.expect("a failure");
    assert_eq!(failure.kind, "HISTORY_TOO_LARGE", "{failure:?}");
    // The stream is still up and still gets work (started through its replica, which hands it
    // to its own worker at once).
    tight
        .client()
        .await
        .start_json("target", serde_json::json!({}), StartOptions::id("small"))
        .await
        .unwrap();
    assert_eq!(other.next_dispatch().await.workflow_id, "small");
    roomy.assert_log_clean(&[]);
    tight.assert_log_clean(&[]);
}

/// Lists stay within what a response may carry whatever their payloads: a 1,000-message inbox
/// of 8 KB messages is listed whole, page by page when asked, and workflows with 3 MiB inputs
/// are listed a few per page instead of a page too large to send.
async fn large_lists_are_read_a_page_at_a_time(backend: Backend) {
    let Some((_db, server)) = fast_server(backend, &[]).await else {
        return;
    };
    let client = server.client().await;
    // Registered, but granting no credit: what is started stays ENQUEUED.
    let _w = RawWorker::connect(&server.addr, "idle", &["target"]).await;
    client
        .start_json("target", serde_json::json!({}), StartOptions::id("inbox"))
        .await
        .unwrap();
    let body = "m".repeat(8 * 1024);
    for i in 0..1_000 {
        client
            .send_message("inbox", "t", &serde_json::json!({ "i": i, "body": body }), None)
            .await
            .unwrap();
    }
    let all = client.messages("inbox").await.unwrap();
    assert_eq!(all.len(), 1_000);
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut rpc = v1::workflow_service_client::WorkflowServiceClient::new(channel).max_decoding_message_size(64 << 20);
    let (mut token, mut seen, mut pages) = (String::new(), Vec::new(), 0);
    loop {
        let r = rpc
            .list_messages(v1::ListMessagesRequest {
                workflow_id: "inbox".into(),
                page_size: 300,
                page_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.messages.len() <= 300);
        seen.extend(r.messages.into_iter().map(|m| m.message_id));
        pages += 1;
        if r.next_page_token.is_empty() {
            break;
        }
        token = r.next_page_token;
    }
    assert_eq!(pages, 4, "1,000 messages, 300 a page");
    assert_eq!(
        seen,
        all.iter().map(|m| m.message_id.clone()).collect::<Vec<_>>(),
        "the same, in order"
    );

    let big = "i".repeat(3 * 1024 * 1024);
    for i in 0..6 {
        client
            .start_json("target", serde_json::json!(big), StartOptions::id(format!("big-{i}")))
            .await
            .unwrap();
    }
    let (mut token, mut listed, mut pages) = (String::new(), 0, 0);
    loop {
        let r = rpc
            .list_workflows(v1::ListWorkflowsRequest {
                workflow_name: "target".into(),
                page_token: token,
                ..Default::default()
            })
            .await
            .expect("a page that fits")
            .into_inner();
        listed += r.workflows.len();
        pages += 1;
        if r.next_page_token.is_empty() {
            break;
        }
        token = r.next_page_token;
    }
    assert_eq!(listed, 7, "the inbox and the six large ones");
    assert!(pages >= 3, "large inputs split the list into pages: {pages}");
    server.assert_log_clean(&[]);
}

on_both_stores!(
    large_lists_are_read_a_page_at_a_time,
    a_history_too_large_to_dispatch_fails_the_workflow,
    only_the_stream_holding_a_workflow_may_write_for_it,
    a_live_workers_id_cannot_be_taken,
    a_hello_registering_without_end_is_refused,
    a_flood_on_one_stream_is_answered_without_starving_others,
    malformed_and_late_inputs_are_refused_clearly,
);
