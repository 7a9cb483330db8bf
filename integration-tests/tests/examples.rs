//! The SDK examples, run as their README says: a real server, the example's worker process,
//! starts through the client. `sleepy` sleeps durably: its worker killed -9 mid-sleep, a new
//! one finishes the sleep (only the remainder) and returns the number.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use waymark_integration_tests::{fast_recovery_args, wait_for, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{StartOptions, WorkflowStatus};

struct Example(std::process::Child);

impl Example {
    fn start(name: &str, server: &str) -> Example {
        let bin = waymark_bin().with_file_name("examples").join(name);
        assert!(
            bin.exists(),
            "{} not built: cargo build --examples (make test does)",
            bin.display()
        );
        let child = Command::new(bin)
            .env("WAYMARK_SERVER", server)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn example");
        Example(child)
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleepy_sleeps_durably_and_returns_its_input() {
    let Some(db) = TestDatabase::new(Backend::Sqlite).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let c = server.client().await;
    let mut worker = Example::start("sleepy", &server.addr);
    let started = Instant::now();
    wait_for("the sleepy worker to register", Duration::from_secs(60), || async {
        c.start_json("sleepy", serde_json::json!(2500), StartOptions::id("nap"))
            .await
            .ok()
    })
    .await;
    // The sleep's wake time is recorded as a step before the worker waits.
    wait_for("the sleep to be recorded", Duration::from_secs(30), || async {
        c.steps("nap").await.ok().filter(|s| !s.is_empty()).map(|_| ())
    })
    .await;
    drop(std::mem::replace(&mut worker, Example::start("sleepy", &server.addr)));
    let w = c.await_workflow("nap", Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(
        (w.status, w.output),
        (WorkflowStatus::Success, Some(serde_json::json!(2500)))
    );
    assert!(
        started.elapsed() >= Duration::from_millis(2500),
        "it slept its whole time"
    );
    assert!(w.recovery_attempts >= 1, "a second worker finished it");
    let steps = c.steps("nap").await.unwrap();
    assert_eq!(steps.len(), 1, "one recorded sleep, not two: {steps:?}");
}
