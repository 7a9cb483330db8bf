//! Replay before deploy, the way a user's CI does it: a live workflow's history exported by the
//! CLI (`waymark workflow export ID`), saved to a file, read back and replayed offline against
//! changed workflow code — the same code replays to the live result, an unguarded new step is
//! non-determinism naming both steps, the same step behind `patched` replays the old branch,
//! and a workflow the code no longer registers is an error. No step function runs in a replay.

use std::{
    future::Future,
    sync::atomic::{AtomicU32, Ordering},
};

use serde_json::{json, Value};
use waymark_integration_tests::{cli, setup, Backend};
use waymark_sdk::{Error, RecordedHistory, Replayed, StartOptions, Worker, WorkflowContext, WorkflowError};

/// Counts step functions run during replays: none may run.
static RAN: AtomicU32 = AtomicU32::new(0);

async fn echo_step(ctx: &WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    ctx.step("echo", move || {
        RAN.fetch_add(1, Ordering::SeqCst);
        let v = input.clone();
        async move { Ok::<_, String>(v) }
    })
    .await
}

async fn audit(ctx: &WorkflowContext) -> Result<(), WorkflowError> {
    ctx.step("audit", || {
        RAN.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, String>(()) }
    })
    .await
}

/// The code the test worker runs for `echo` (src/bin/waymark-test-worker.rs).
async fn v1(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    echo_step(&ctx, input).await
}

/// An audit step added before it: not safe for histories made by v1.
async fn v2_unsafe(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    audit(&ctx).await?;
    echo_step(&ctx, input).await
}

/// The same change behind `patched`: old histories take the old branch.
async fn v2_patched(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    if ctx.patched("add-audit")? {
        audit(&ctx).await?;
    }
    echo_step(&ctx, input).await
}

/// Replays `history` against `f` registered under the history's name.
async fn replay_with<F, Fut>(history: &RecordedHistory, f: F) -> Replayed
where
    F: Fn(WorkflowContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, WorkflowError>> + Send + 'static,
{
    let worker = Worker::builder().workflow(history.workflow_name.clone(), f).build();
    worker.replayer().replay(history).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_exported_by_the_cli_checks_changed_code_before_a_deploy() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let input = json!({ "order": 7 });
    s.client
        .start_json("echo", input.clone(), StartOptions::id("deploy-1"))
        .await
        .unwrap();
    let done = s
        .client
        .await_workflow("deploy-1", Some(std::time::Duration::from_secs(120)))
        .await
        .unwrap();
    let output = done.output.clone().expect("succeeded");

    let (code, exported, err) = cli(&s.server.addr, &["workflow", "export", "deploy-1"]);
    assert_eq!(code, 0, "{err}");
    let file = s.db.dir.join("deploy-1.json");
    std::fs::write(&file, &exported).unwrap();
    let history: RecordedHistory = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!((history.workflow_name.as_str(), &history.input), ("echo", &input));
    assert_eq!(
        history.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["echo"]
    );

    let same = replay_with(&history, v1).await;
    assert!(matches!(&same, Replayed::Returned(v) if *v == output), "{same:?}");
    let unsafe_change = replay_with(&history, v2_unsafe).await;
    match &unsafe_change {
        Replayed::Failed(WorkflowError::NonDeterminism(message)) => {
            assert!(
                message.contains("\"audit\"") && message.contains("\"echo\""),
                "{message}"
            )
        }
        other => panic!("an unguarded new step replayed as {other:?}"),
    }
    let patched = replay_with(&history, v2_patched).await;
    assert!(matches!(&patched, Replayed::Returned(v) if *v == output), "{patched:?}");
    let renamed = Worker::builder().workflow("echo-v2", v1).build();
    match renamed.replayer().replay(&history).await {
        Err(Error::UnknownWorkflow(name)) => assert_eq!(name, "echo"),
        other => panic!("a history of an unregistered workflow: {other:?}"),
    }
    assert_eq!(RAN.load(Ordering::SeqCst), 0, "no step function runs in a replay");
}
