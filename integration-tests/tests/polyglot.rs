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

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use waymark_integration_tests::{wait_for, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(90);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn example_dir() -> PathBuf {
    repo_root().join("sdk-clients/examples/polyglot")
}

fn python() -> PathBuf {
    repo_root().join("sdk-clients/python/.venv/bin/python")
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why the test cannot run here, if it cannot: a toolchain or an SDK's dependencies missing.
fn missing_dependency() -> Option<String> {
    let root = repo_root();
    if !succeeds(Command::new(python()).args(["-c", "import waymark"])) {
        return Some("the Python SDK's venv (make -C sdk-clients/python deps)".into());
    }
    // The Go modules must be in the module cache already: nothing is downloaded here.
    if !succeeds(
        Command::new("go")
            .args(["list", "-deps", "./..."])
            .env("GOPROXY", "off")
            .current_dir(example_dir().join("go")),
    ) {
        return Some("go, or the Go SDK's modules (make -C sdk-clients/go deps)".into());
    }
    if !succeeds(Command::new("node").arg("--version"))
        || !root.join("sdk-clients/typescript/node_modules/.bin/tsc").exists()
    {
        return Some("node, or the TypeScript SDK's node_modules (make -C sdk-clients/typescript deps)".into());
    }
    None
}

/// A program of the example, killed when dropped; its output goes to a log file.
struct Program {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Program {
    fn start(name: &'static str, mut cmd: Command, server: &str, dir: &Path) -> Program {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = cmd
            .env("WAYMARK_SERVER", server)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Program { name, child, log }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every program's log, for a failure message.
fn logs(programs: &[&Program]) -> String {
    programs
        .iter()
        .map(|p| {
            format!(
                "--- {} ({})\n{}",
                p.name,
                p.log.display(),
                std::fs::read_to_string(&p.log).unwrap_or_default()
            )
        })
        .collect()
}

/// Starts a workflow, polling while no worker has registered its name yet (the start is
/// idempotent on the id, so polling never starts two).
async fn start_when_registered(c: &Client, name: &str, id: &str, input: serde_json::Value) {
    wait_for(&format!("a worker to register {name:?}"), PATIENCE, || async {
        match c.start_json(name, input.clone(), StartOptions::id(id)).await {
            Ok(_) => Some(()),
            Err(e) if e.reason() == Some("WORKFLOW_NAME_UNKNOWN") => None,
            Err(e) => panic!("start {name}: {e}"),
        }
    })
    .await
}

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
    // The Go programs and the TypeScript ones (compiled against the SDK's dist).
    let built = Command::new("make")
        .args(["-s", "-C"])
        .arg(&dir)
        .arg("programs")
        .output()
        .expect("run make");
    assert!(
        built.status.success(),
        "make -C sdk-clients/examples/polyglot programs failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
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
