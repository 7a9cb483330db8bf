//! Continue-as-new through a real server on SQLite and PostgreSQL, with real worker processes:
//! a workflow that loops by continuing as new keeps its id (its awaiter, its inbox), each run
//! starts with an empty history, each ended run is kept as `<id>/run-<n>` with its own steps —
//! and a worker killed -9 between runs loses nothing and continues no run twice.

use std::time::Duration;

use serde_json::json;
use waymark_integration_tests::{cli, setup, wait_for, Backend, WorkerProcess};
use waymark_sdk::{ListOptions, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

async fn a_looping_workflow_continues_as_new_under_its_id(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    let c = s.client.clone();
    // Each run waits for a "go" message, ticks, and continues with n + 1 until n = 3.
    let input = json!({ "n": 0, "until": 3, "wait": true });
    c.start_json("looper", input, StartOptions::id("loop")).await.unwrap();
    let awaiter = {
        let c = c.clone();
        tokio::spawn(async move { c.await_workflow("loop", Some(PATIENCE)).await })
    };
    c.send_message("loop", "go", &json!(0), None).await.unwrap();
    // The first run ends and the second waits: the worker is killed -9 there.
    let second = wait_for("the second run waiting", PATIENCE, || async {
        let w = c.get("loop").await.unwrap();
        (w.run == 1 && w.status == WorkflowStatus::Delayed).then_some(w)
    })
    .await;
    assert!(
        second.input == json!({ "n": 1, "until": 3, "wait": true }),
        "{second:?}"
    );
    s.worker.kill();
    let effects = s.db.dir.join("effects.log");
    let _next = WorkerProcess::start(&s.server.addr, &effects, 20, "next");
    // Messages sent to the workflow's id reach whichever run is current, read or not yet.
    for i in 1..4 {
        c.send_message("loop", "go", &json!(i), None).await.unwrap();
    }
    let done = c.await_workflow("loop", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.output.clone(), done.run),
        (WorkflowStatus::Success, Some(json!(3)), 3)
    );
    let awaited = awaiter.await.unwrap().unwrap();
    assert_eq!(
        (awaited.workflow_id.as_str(), awaited.status),
        ("loop", WorkflowStatus::Success),
        "an awaiter from before the first run gets the end"
    );

    // The current run's history is its own: the recv (its deadline, then the message) and one
    // tick.
    let names = |steps: Vec<waymark_sdk::StepInfo>| steps.into_iter().map(|s| s.name).collect::<Vec<_>>();
    assert_eq!(
        names(c.steps("loop").await.unwrap()),
        ["waymark.recv.deadline", "waymark.recv", "tick"]
    );
    // Every ended run kept its own, exactly once each: nothing ran twice after the kill.
    let ended = c
        .list(ListOptions {
            statuses: vec![WorkflowStatus::ContinuedAsNew],
            workflow_name: Some("looper".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .0;
    let mut ids: Vec<&str> = ended.iter().map(|w| w.workflow_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["loop/run-0", "loop/run-1", "loop/run-2"]);
    for (i, w) in ended.iter().rev().enumerate() {
        assert_eq!((w.run, w.continued_as_workflow_id.as_str()), (i as u32, "loop"));
        assert_eq!(w.input, json!({ "n": i, "until": 3, "wait": true }));
        let steps = c.steps(&w.workflow_id).await.unwrap();
        assert_eq!(steps.len(), 3, "{}: {steps:?}", w.workflow_id);
        assert_eq!(
            (steps[2].name.as_str(), steps[2].output.clone()),
            ("tick", Some(json!(i)))
        );
    }
    let (code, shown, err) = cli(&s.server.addr, &["workflow", "get", "loop/run-1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains("CONTINUED_AS_NEW") && shown.contains("continued as") && shown.contains("loop"),
        "{shown}"
    );
    let (_, shown, _) = cli(&s.server.addr, &["workflow", "get", "loop"]);
    assert!(shown.contains("run") && shown.contains('3'), "{shown}");
}

waymark_integration_tests::on_both_stores!(a_looping_workflow_continues_as_new_under_its_id);
