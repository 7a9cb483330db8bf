//! The polyglot example's programs (`sdk-clients/examples/polyglot/`) as test processes: where
//! they are, whether this machine can run them, and a handle that kills one when dropped.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use waymark_sdk::{Client, StartOptions};

use crate::wait_for;

/// How long a step of a polyglot scenario may take on a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(90);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn example_dir() -> PathBuf {
    repo_root().join("sdk-clients/examples/polyglot")
}

pub fn python() -> PathBuf {
    repo_root().join("sdk-clients/python/.venv/bin/python")
}

pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why the test cannot run here, if it cannot: a toolchain or an SDK's dependencies missing.
pub fn missing_dependency() -> Option<String> {
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
pub struct Program {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
}

impl Program {
    pub fn start(name: &'static str, mut cmd: Command, server: &str, dir: &Path) -> Program {
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
pub fn logs(programs: &[&Program]) -> String {
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
pub async fn start_when_registered(c: &Client, name: &str, id: &str, input: serde_json::Value) {
    wait_for(&format!("a worker to register {name:?}"), PATIENCE, || async {
        match c.start_json(name, input.clone(), StartOptions::id(id)).await {
            Ok(_) => Some(()),
            Err(e) if e.reason() == Some("WORKFLOW_NAME_UNKNOWN") => None,
            Err(e) => panic!("start {name}: {e}"),
        }
    })
    .await
}

/// Builds the example's Go programs and TypeScript ones (against the SDK's dist).
pub fn build_programs() {
    let built = Command::new("make")
        .args(["-s", "-C"])
        .arg(example_dir())
        .arg("programs")
        .output()
        .expect("run make");
    assert!(
        built.status.success(),
        "make -C sdk-clients/examples/polyglot programs failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
}
