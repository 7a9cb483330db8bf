//! The polyglot example (`sdk-clients/examples/polyglot/`) end to end, as real processes against
//! a real server: a Rust, a Go, a Python and a TypeScript worker, a Go and a TypeScript client.
//!
//! - the Python workflow `combine` calls the remote steps `shout` (TypeScript) and `reverse` (Go)
//!   by name and returns both results;
//! - the Go client starts the Rust workflow `greet` and prints its output;
//! - the TypeScript client starts the Python workflow `countdown` and prints its stream's values
//!   as they are written (the first before the workflow closes the stream);
//! - the Rust workflow `courier` sends a message that the Go workflow `inbox` receives and returns.
//!
//! Skipped (with a message) only when a language's toolchain or SDK dependencies are missing:
//! `make test` installs them (each SDK's `make deps`) before it runs the Rust tests.

use std::process::{Command, Stdio};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use waymark_integration_tests::polyglot::{
    build_programs, example_dir, logs, missing_dependency, python, start_when_registered, Program, PATIENCE,
};
use waymark_integration_tests::{wait_for, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{Client, WorkflowStatus};

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn output_of(c: &Client, id: &str) -> serde_json::Value {
    let w = c.await_workflow(id, Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success, "{id}: {w:?}");
    w.output.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polyglot_scenario_runs_across_four_languages() {
    if let Some(missing) = missing_dependency() {
        waymark_integration_tests::skip_or_fail(&format!("the polyglot test needs {missing}"));
        return;
    }
    let dir = example_dir();
    build_programs();
    let rust_worker = waymark_bin().with_file_name("examples").join("polyglot");
    assert!(
        rust_worker.exists(),
        "{} not built: cargo build --examples (make test does)",
        rust_worker.display()
    );

    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let server = ServerProcess::start(&db, &[]).await;
    let c = server.client().await;
    let addr = server.addr.as_str();
    let mut python_worker = Command::new(python());
    python_worker.arg(dir.join("python/worker.py"));
    let mut ts_worker = Command::new("node");
    ts_worker.arg(dir.join("ts/dist/worker.js"));
    let workers = [
        Program::start("rust-worker", Command::new(rust_worker), addr, &db.dir),
        Program::start("go-worker", Command::new(dir.join("bin/go-worker")), addr, &db.dir),
        Program::start("python-worker", python_worker, addr, &db.dir),
        Program::start("ts-worker", ts_worker, addr, &db.dir),
    ];
    let workers: Vec<&Program> = workers.iter().collect();

    // The Go workflow waits for a message; the Python one calls a TypeScript and a Go step; the
    // Rust one sends the Go one its message.
    start_when_registered(&c, "inbox", "inbox-1", json!(null)).await;
    start_when_registered(&c, "combine", "combine-1", json!("waymark")).await;
    start_when_registered(
        &c,
        "courier",
        "courier-1",
        json!({"to": "inbox-1", "text": "Hello from a Rust workflow"}),
    )
    .await;

    // The Go client starts the Rust workflow `greet` and prints its output.
    let mut go_client = Program::start(
        "go-client",
        {
            let mut cmd = Command::new(dir.join("bin/go-client"));
            cmd.arg("Gopher");
            cmd
        },
        addr,
        &db.dir,
    );
    let exit = wait_for("the Go client to finish", PATIENCE, || {
        let status = go_client.child.try_wait().unwrap();
        async move { status }
    })
    .await;
    let go_printed = std::fs::read_to_string(&go_client.log).unwrap();
    assert!(exit.success(), "the Go client failed:\n{}", logs(&[&go_client]));
    assert_eq!(go_printed.trim(), "Hello, Gopher, from a Rust workflow!");
    let greet = c.get("greet-Gopher").await.unwrap();
    assert_eq!(
        (greet.workflow_name.as_str(), greet.output),
        ("greet", Some(json!("Hello, Gopher, from a Rust workflow!")))
    );

    // The TypeScript client starts `countdown` and prints each stream value as it comes.
    let mut ts_client = tokio::process::Command::new("node")
        .arg(dir.join("ts/dist/read-stream.js"))
        .args(["countdown-1", "3"])
        .env("WAYMARK_SERVER", addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the TypeScript client");
    let mut lines = BufReader::new(ts_client.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let mut first_arrived_ms = None;
    while let Some(line) = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("the TypeScript client printed nothing more:\n{}", logs(&workers)))
        .unwrap()
    {
        first_arrived_ms.get_or_insert_with(unix_ms);
        printed.push(line);
    }
    let exit = tokio::time::timeout(PATIENCE, ts_client.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "the TypeScript client failed: {exit}");
    assert_eq!(printed, ["3", "2", "1"]);
    // Live: the first value was printed before the workflow closed the stream (it writes the
    // values half a second apart), not all at once at the end.
    let closed_ms = c
        .steps("countdown-1")
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.name == "waymark.close_stream")
        .expect("the stream's close is recorded")
        .recorded_at_ms;
    let first_arrived_ms = first_arrived_ms.unwrap();
    assert!(
        first_arrived_ms < closed_ms,
        "the first value was printed at {first_arrived_ms}, after the stream was closed at {closed_ms}"
    );
    assert_eq!(output_of(&c, "countdown-1").await, json!("liftoff"));

    // The Python workflow's result combines the TypeScript step's and the Go step's.
    assert_eq!(
        output_of(&c, "combine-1").await,
        json!({"shout": "WAYMARK!", "reverse": "kramyaw"}),
        "{}",
        logs(&workers)
    );
    let steps: Vec<String> = c
        .steps("combine-1")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        steps,
        ["shout", "reverse"],
        "each remote call is recorded as a step of the caller"
    );

    // The Go workflow received the Rust workflow's message.
    assert_eq!(output_of(&c, "courier-1").await, json!("sent to inbox-1"));
    assert_eq!(output_of(&c, "inbox-1").await, json!("Hello from a Rust workflow"));
    let messages = c.messages("inbox-1").await.unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
}
