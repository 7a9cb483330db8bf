//! A test worker process (`waymark-test-worker`, or any worker command) whose log goes beside
//! the side-effect log, killed when dropped.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{own_bin, skip_or_fail, wait_for};

/// The log file of worker `name`, beside the side-effect log, opened for appending.
fn worker_log(effects: &Path, name: &str) -> (PathBuf, std::fs::File) {
    let log = effects.with_file_name(format!("worker-{name}.log"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    (log, file)
}

/// A test worker process (`waymark-test-worker`). Killed with SIGKILL when dropped.
pub struct WorkerProcess {
    child: Option<Child>,
    pub log: PathBuf,
}

impl WorkerProcess {
    /// Starts a worker registering workflow `counted`, appending each step's side effect to
    /// `effects`.
    pub fn start(server: &str, effects: &Path, capacity: u32, name: &str) -> WorkerProcess {
        Self::start_with_env(server, effects, capacity, name, &[])
    }

    /// Like `start`, with extra environment: `WAYMARK_APP_VERSION` (default `test-1`) and
    /// `WAYMARK_TEST_VARIANT=renamed` (the `counted` steps get other names, as after a code
    /// change that breaks determinism).
    pub fn start_with_env(
        server: &str,
        effects: &Path,
        capacity: u32,
        name: &str,
        env: &[(&str, &str)],
    ) -> WorkerProcess {
        let (log, err) = worker_log(effects, name);
        let child = Command::new(own_bin("waymark-test-worker"))
            .env("WAYMARK_SERVER", server)
            .env("WAYMARK_SIDE_EFFECTS", effects)
            .env("WAYMARK_CAPACITY", capacity.to_string())
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("spawn test worker");
        WorkerProcess {
            child: Some(child),
            log,
        }
    }

    /// A worker process of any kind, from `command` (its stderr goes to the worker log named
    /// `name` beside `effects`).
    pub fn from_command(command: &mut Command, effects: &Path, name: &str) -> WorkerProcess {
        let (log, err) = worker_log(effects, name);
        let child = command.stdout(Stdio::null()).stderr(err).spawn().expect("spawn worker");
        WorkerProcess {
            child: Some(child),
            log,
        }
    }

    /// A worker in Python serving the same `counted` workflow as the Rust test worker (same
    /// step names, results, side-effect lines and app version), so a workflow begun on one can
    /// be recovered on the other: `integration-tests/workers/python/counted.py` on the Python
    /// SDK's virtualenv (`make deps` makes it). `None` when that is missing and skipping is
    /// allowed (see [`skip_or_fail`]).
    pub fn start_python(server: &str, effects: &Path, capacity: u32, name: &str) -> Option<WorkerProcess> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
        let python = root.join("sdk-clients/python/.venv/bin/python");
        let script = root.join("integration-tests/workers/python/counted.py");
        if !python.exists() || !script.exists() {
            skip_or_fail(&format!(
                "the Python worker needs {} and {} (run `make deps`)",
                python.display(),
                script.display()
            ));
            return None;
        }
        let (log, err) = worker_log(effects, name);
        let child = Command::new(python)
            .arg(script)
            .env("WAYMARK_SERVER", server)
            .env("WAYMARK_SIDE_EFFECTS", effects)
            .env("WAYMARK_CAPACITY", capacity.to_string())
            .env("WAYMARK_APP_VERSION", "test-1")
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("spawn the Python test worker");
        Some(WorkerProcess {
            child: Some(child),
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (polling, up to `patience`) for the process to exit by itself; its exit code.
    pub async fn wait_exit(&mut self, patience: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + patience;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("wait on the worker") {
                return status.code();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the worker did not exit within {patience:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until this worker's session is open (the Rust SDK logs it at info level). One
    /// worker registering a workflow lets starts through; a test that needs the whole fleet
    /// attached waits on each.
    pub async fn wait_connected(&self) {
        wait_for("a worker to connect", Duration::from_secs(120), || async {
            self.log_text().contains("connected to Waymark").then_some(())
        })
        .await
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
