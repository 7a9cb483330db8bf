//! The golden workflows: small workflows, one per durable operation, whose recorded histories
//! (`contract/histories/`) are the cross-SDK contract. The test worker registers them; a live
//! run writes their histories; every SDK's suite replays those histories offline against its
//! own copy of the same code (same names, same calls in the same order, same results) and must
//! reach the recorded outcome. Each function's comment is the specification the other SDKs
//! follow.

use std::time::Duration;

use serde_json::{json, Value};
use waymark_sdk::{Awaitable, RetryPolicy, StepOptions, WorkerBuilder, WorkflowContext, WorkflowError};

/// Registers every golden workflow (and the remote step they call).
pub fn register(builder: WorkerBuilder) -> WorkerBuilder {
    builder
        .workflow("golden.steps", steps)
        .workflow("golden.sleep", sleep)
        .workflow("golden.messages", messages)
        .workflow("golden.events", events)
        .workflow("golden.stream", stream)
        .workflow("golden.child", child)
        .workflow("golden.child_body", child_body)
        .workflow("golden.remote", remote)
        .workflow("golden.drawn", drawn)
        .workflow("golden.patched", patched)
        .workflow("golden.select", select)
        .workflow("golden.wait_all", wait_all)
        .workflow("golden.gated", gated)
        .workflow("golden.update", update)
        .step("golden.flaky", flaky)
}

/// Input `{"n": N}`. Step "add" returns N + 1; step "fail" fails with "boom" (no retries), which
/// the workflow catches. Returns `{"sum": N + 1, "caught": "boom"}`.
async fn steps(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let n = input["n"].as_i64().unwrap_or(0);
    let sum: i64 = ctx.step("add", || async move { Ok::<_, String>(n + 1) }).await?;
    let caught = match ctx.step("fail", || async { Err::<i64, _>("boom") }).await {
        Err(WorkflowError::Step { message, .. }) => message,
        // Cancelled, taken over, the end of a replayed history: not this workflow's to catch.
        Err(e) if e.is_interruption() => return Err(e),
        other => return Err(WorkflowError::failed("Unexpected", format!("{other:?}"))),
    };
    Ok(json!({ "sum": sum, "caught": caught }))
}

/// Takes one update named "add" (60 s); step "apply" returns its args' N + 1, and the update is
/// answered with `{"total": N + 1}`. Returns `{"update": <its id>, "total": N + 1}`.
async fn update(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let Some(u) = ctx.recv_update::<Value>("add", Duration::from_secs(60)).await? else {
        return Ok(json!({ "update": null }));
    };
    let n = u.args["n"].as_i64().unwrap_or(0);
    let total: i64 = ctx.step("apply", || async move { Ok::<_, String>(n + 1) }).await?;
    ctx.answer_update(&u.id, &json!({ "total": total })).await?;
    Ok(json!({ "update": u.id, "total": total }))
}

/// Sleeps 10 ms; returns "slept".
async fn sleep(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    ctx.sleep(Duration::from_millis(10)).await?;
    Ok(json!("slept"))
}

/// Sends `{"hi": 1}` to itself on topic "t", receives on "t" (60 s), then receives on "none"
/// (10 ms, times out). Returns `{"got": {"hi": 1}, "none": null}`.
async fn messages(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    ctx.send(ctx.workflow_id(), "t", &json!({ "hi": 1 })).await?;
    let got: Option<Value> = ctx.recv("t", Duration::from_secs(60)).await?;
    let none: Option<Value> = ctx.recv("none", Duration::from_millis(10)).await?;
    Ok(json!({ "got": got, "none": none }))
}

/// Sets its event "k" to 7, then reads it back (1 s). Returns 7.
async fn events(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    ctx.set_event("k", &7).await?;
    let v: Option<Value> = ctx.get_event(ctx.workflow_id(), "k", Duration::from_secs(1)).await?;
    Ok(v.unwrap_or(Value::Null))
}

/// Writes "a" then "b" to its stream "s" and closes it. Returns the offset "b" was written at.
async fn stream(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    ctx.write_stream("s", &"a").await?;
    let b = ctx.write_stream("s", &"b").await?;
    ctx.close_stream("s").await?;
    Ok(json!(b))
}

/// Starts "golden.child_body" with `{"n": 3}` (its id derived by the server) and awaits it.
/// Returns the child's output.
async fn child(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let id = ctx.start_child("golden.child_body", &json!({ "n": 3 }), None).await?;
    ctx.await_child::<Value>(&id).await
}

/// Input `{"n": N}`: step "double" returns 2N; returns it.
async fn child_body(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let n = input["n"].as_i64().unwrap_or(0);
    let doubled: i64 = ctx.step("double", || async move { Ok::<_, String>(2 * n) }).await?;
    Ok(json!(doubled))
}

/// Calls the remote step "golden.flaky" with `{"fail_times": 1}` and up to 3 attempts (50 ms
/// backoff): its first attempt fails, its second succeeds. Returns the step's output.
async fn remote(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let options = StepOptions::default().retry(RetryPolicy::attempts(3).with_backoff(
        Duration::from_millis(50),
        2.0,
        Duration::from_secs(1),
    ));
    ctx.call_step("golden.flaky", &json!({ "fail_times": 1 }), options)
        .await
}

/// Reads the time and draws a UUID. Returns `{"now_ms": …, "uuid": "…"}`.
async fn drawn(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let now = ctx.now().await?;
    let id = ctx.uuid().await?;
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    Ok(json!({ "now_ms": now_ms, "uuid": id.to_string() }))
}

/// Asks `patched("golden-fix")`. The new branch runs step "fixed", which returns "new"; the old
/// one runs step "unfixed", which returns "old". Returns `{"branch": <what the step returned>}`.
async fn patched(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let branch: String = if ctx.patched("golden-fix")? {
        ctx.step("fixed", || async { Ok::<_, String>("new".to_string()) })
            .await?
    } else {
        ctx.step("unfixed", || async { Ok::<_, String>("old".to_string()) })
            .await?
    };
    Ok(json!({ "branch": branch }))
}

/// Calls the remote step "golden.flaky" with `{"fail_times": 0}` (the server's retry policy),
/// then starts "golden.gated" (its id derived by the server), and waits for the first of the two
/// to finish, the step first: the step wins (index 0), as the child cannot finish before it gets
/// the message this workflow sends it only after the wait. Then reads the step's result, sends
/// the child `"go"` on topic "go", and awaits the child. Returns
/// `{"winner": 0, "step": "ok after 0 failures", "child": "go"}`.
async fn select(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let step = ctx
        .start_step("golden.flaky", &json!({ "fail_times": 0 }), StepOptions::default())
        .await?;
    let child = ctx.start_child("golden.gated", &json!({}), None).await?;
    let winner = ctx
        .wait_first(&[Awaitable::from(&step), Awaitable::Workflow(child.clone())])
        .await?;
    let result: Value = ctx.step_result(&step).await?;
    ctx.send(&child, "go", &"go").await?;
    let got: Value = ctx.await_child(&child).await?;
    Ok(json!({ "winner": winner, "step": result, "child": got }))
}

/// Calls the remote step "golden.flaky" with `{"fail_times": 0}` (the server's retry policy)
/// and starts "golden.gated" (its id derived by the server), as golden.select does; reads the
/// step's result (so the step has finished before the child can), sends the child `"go"` on
/// topic "go", then waits for both to finish, the child first. The wait records the last to
/// finish, the child (index 0; a tie would go to the lower index, the child too). Then awaits
/// the child and reads the step's result again. Returns
/// `{"results": ["go", "ok after 0 failures"]}`.
async fn wait_all(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let step = ctx
        .start_step("golden.flaky", &json!({ "fail_times": 0 }), StepOptions::default())
        .await?;
    let child = ctx.start_child("golden.gated", &json!({}), None).await?;
    let _: Value = ctx.step_result(&step).await?;
    ctx.send(&child, "go", &"go").await?;
    ctx.wait_all(&[Awaitable::Workflow(child.clone()), Awaitable::from(&step)])
        .await?;
    let got: Value = ctx.await_child(&child).await?;
    let result: Value = ctx.step_result(&step).await?;
    Ok(json!({ "results": [got, result] }))
}

/// Receives on topic "go" (60 s). Returns what it got (null when nothing came).
async fn gated(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let got: Option<Value> = ctx.recv("go", Duration::from_secs(60)).await?;
    Ok(got.unwrap_or(Value::Null))
}

/// The remote step: fails its first `fail_times` attempts in this process, then returns
/// `"ok after N failures"`. (Only the live run calls it; a replay reads its recorded result.)
/// Every attempt counts, so golden.remote runs before the others that call it.
async fn flaky(input: Value) -> Result<Value, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let fail_times = input["fail_times"].as_u64().unwrap_or(0);
    let call = CALLS.fetch_add(1, Ordering::SeqCst);
    if call < fail_times {
        return Err(format!("planned failure {}", call + 1));
    }
    Ok(json!(format!("ok after {fail_times} failures")))
}
