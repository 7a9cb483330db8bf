//! Test harness for end-to-end tests and the load generator: real `waymark` server processes,
//! real worker processes, real PostgreSQL databases, and waits on conditions (never on time).

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub mod certs;
pub mod golden;
pub mod postgres_cluster;
pub mod raw_worker;
pub mod side_effects;
pub mod workload;

/// A test that cannot run here (a missing toolchain or database) skips with a note — unless
/// `WAYMARK_NO_SKIP=1` (set by `.ci/run`), where a skip would hide a missing install step, so it
/// fails instead.
pub fn skip_or_fail(reason: &str) {
    if std::env::var("WAYMARK_NO_SKIP").as_deref() == Ok("1") {
        panic!("this test would be skipped ({reason}), and WAYMARK_NO_SKIP=1 forbids skipping");
    }
    eprintln!("skipping: {reason}");
}

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh, empty database for one test. SQLite: a file in a new temp dir. PostgreSQL: a new
/// database on the server `WAYMARK_TEST_POSTGRES_URL` names (started by
/// `integration-tests/with-postgres.sh`, which `make test` uses).
pub struct TestDatabase {
    pub url: String,
    pub dir: PathBuf,
}

impl TestDatabase {
    /// `None` only when PostgreSQL is asked for, not configured, and `WAYMARK_SKIP_POSTGRES=1`.
    pub async fn new(backend: Backend) -> Option<TestDatabase> {
        let dir = std::env::temp_dir().join(format!("waymark-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        match backend {
            Backend::Sqlite => Some(TestDatabase {
                url: format!("sqlite:{}", dir.join("waymark.db").display()),
                dir,
            }),
            Backend::Postgres => {
                let base = match std::env::var("WAYMARK_TEST_POSTGRES_URL") {
                    Ok(u) => u,
                    Err(_) if std::env::var("WAYMARK_SKIP_POSTGRES").as_deref() == Ok("1") => {
                        skip_or_fail("WAYMARK_SKIP_POSTGRES=1");
                        return None;
                    }
                    Err(_) => panic!(
                        "WAYMARK_TEST_POSTGRES_URL is not set: run PostgreSQL tests through `make test` or \
                         `integration-tests/with-postgres.sh cargo test` (or set WAYMARK_SKIP_POSTGRES=1 to skip them)"
                    ),
                };
                let name = format!("wm_it_{}", uuid::Uuid::new_v4().simple());
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&base)
                    .await
                    .expect("connect to test PostgreSQL");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await
                    .expect("create database");
                let (prefix, _) = base.rsplit_once('/').expect("postgres url has a database");
                Some(TestDatabase {
                    url: format!("{prefix}/{name}"),
                    dir,
                })
            }
        }
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The `waymark` binary: `WAYMARK_BIN`, else next to the test executable's target directory.
pub fn waymark_bin() -> PathBuf {
    if let Ok(p) = std::env::var("WAYMARK_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join("waymark");
    assert!(
        bin.exists(),
        "{} not found: build it first with `cargo build -p waymark-server` (make test does)",
        bin.display()
    );
    bin
}

/// Runs the `waymark` CLI against `server`: (exit code, stdout, stderr).
pub fn cli(server: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(waymark_bin())
        .args(args)
        .args(["--server", server])
        .output()
        .expect("run waymark");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sibling binary of this crate (the test worker, the bench worker).
pub fn own_bin(name: &str) -> PathBuf {
    let bin = waymark_bin().with_file_name(name);
    assert!(
        bin.exists(),
        "{} not found: build it with `cargo build -p waymark-integration-tests --bins`",
        bin.display()
    );
    bin
}

/// Polls `check` until it returns `Some`, failing the test with `what` after `deadline`.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A server with authentication on (its first admin key made at start) and TLS, with
/// certificates made for the test in `db.dir/certs` (see [`certs`]); its clients trust that
/// CA. Returns the server and the admin key.
pub async fn secured_server(db: &TestDatabase, extra: &[String]) -> (ServerProcess, String) {
    let dir = db.dir.join("certs");
    certs::write(&dir).unwrap();
    let path = |f: &str| dir.join(f).display().to_string();
    let key_file = db.dir.join("admin.key");
    let mut args: Vec<String> = [
        "--auth",
        "--init-admin-key-file",
        &key_file.display().to_string(),
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().cloned());
    let tls = waymark_sdk::ConnectOptions::from_env().tls_ca_pem(std::fs::read(dir.join("ca.pem")).unwrap());
    let server = ServerProcess::start_secured(db, &args, true, tls).await;
    let admin = std::fs::read_to_string(key_file).unwrap().trim().to_string();
    (server, admin)
}

/// A `waymark server` process. Killed with SIGKILL when dropped.
pub struct ServerProcess {
    pub addr: String,
    pub port: u16,
    pub database_url: String,
    pub log: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
    /// How clients reach it: TLS settings and a key, for a server started with them.
    pub connect: waymark_sdk::ConnectOptions,
}

/// A fresh database and a server on it with [`fast_recovery_args`] and `extra` flags; `None`
/// when the backend is not available here (see [`TestDatabase::new`]).
pub async fn fast_server(backend: Backend, extra: &[&str]) -> Option<(TestDatabase, ServerProcess)> {
    let db = TestDatabase::new(backend).await?;
    let mut args = fast_recovery_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let server = ServerProcess::start(&db, &args).await;
    Some((db, server))
}

/// Short leases and intervals so recovery happens within a test's patience.
pub fn fast_recovery_args() -> Vec<String> {
    [
        "--worker-lease",
        "1500ms",
        "--heartbeat-interval",
        "200ms",
        "--recovery-grace",
        "300ms",
        "--recovery-interval",
        "100ms",
        "--dispatch-poll-interval",
        "100ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl ServerProcess {
    pub async fn start(db: &TestDatabase, extra: &[String]) -> ServerProcess {
        Self::start_secured(db, extra, false, waymark_sdk::ConnectOptions::from_env()).await
    }

    /// Starts a server whose clients connect with `connect` (its address is filled in here),
    /// over TLS when `tls` (the flags for it are the caller's, in `extra`).
    pub async fn start_secured(
        db: &TestDatabase,
        extra: &[String],
        tls: bool,
        connect: waymark_sdk::ConnectOptions,
    ) -> ServerProcess {
        let port = free_port();
        let addr = format!("{}://127.0.0.1:{port}", if tls { "https" } else { "http" });
        let mut s = ServerProcess {
            connect: connect.server(&addr),
            addr,
            port,
            database_url: db.url.clone(),
            log: db.dir.join(format!("server-{port}.log")),
            extra: extra.to_vec(),
            child: None,
        };
        s.restart().await;
        s
    }

    /// Starts (again) on the same port and database and waits until it answers.
    pub async fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(waymark_bin())
            .arg("server")
            .args([
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--database-url",
                &self.database_url,
            ])
            .args(&self.extra)
            .env(
                "WAYMARK_LOG",
                std::env::var("WAYMARK_LOG").unwrap_or_else(|_| "info,waymark_server=debug".into()),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn waymark server");
        self.child = Some(child);
        let addr = self.addr.clone();
        let log = self.log.clone();
        let connect = self.connect.clone();
        wait_for(
            &format!("server at {addr} to answer (log: {})", log.display()),
            Duration::from_secs(60),
            || {
                let connect = connect.clone();
                async move {
                    let c = waymark_sdk::Client::connect_with(&connect).await.ok()?;
                    // Any answer from the service itself will do, refusals of the key included.
                    match c.get("readiness-probe").await {
                        Err(e)
                            if matches!(
                                e.reason(),
                                Some("WORKFLOW_NOT_FOUND" | "UNAUTHENTICATED" | "PERMISSION_DENIED")
                            ) =>
                        {
                            Some(())
                        }
                        _ => None,
                    }
                }
            },
        )
        .await;
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for a clean exit; returns the exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        signal(c.id(), "TERM");
        c.wait().ok()?.code()
    }

    pub async fn client(&self) -> waymark_sdk::Client {
        waymark_sdk::Client::connect_with(&self.connect)
            .await
            .expect("connect client")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends a signal by name (KILL, STOP, CONT, TERM) with the system's `kill`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill -{sig} {pid} failed");
}

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

/// Waits until a worker has registered `workflow_name` (starts are refused before that).
pub async fn wait_for_registration(client: &waymark_sdk::Client, workflow_name: &str) {
    wait_for(
        &format!("a worker to register {workflow_name:?}"),
        Duration::from_secs(60),
        || async {
            // The client API learns it the way a service would: a start succeeds. The probe is a
            // zero-step `counted` workflow, harmless to run.
            match client
                .start_json(
                    workflow_name,
                    serde_json::json!({"steps": 0}),
                    waymark_sdk::StartOptions::id(format!("registration-probe-{workflow_name}")),
                )
                .await
            {
                Ok(_) => Some(()),
                Err(e) if e.reason() == Some("WORKFLOW_NAME_UNKNOWN") => None,
                Err(e) => panic!("unexpected error while waiting for registration: {e}"),
            }
        },
    )
    .await
}

/// A server on a fresh database with one test worker (capacity 20) registered: what most
/// end-to-end tests start from.
pub struct Setup {
    pub server: ServerProcess,
    pub client: waymark_sdk::Client,
    pub db: TestDatabase,
    pub worker: WorkerProcess,
}

/// Starts a [`Setup`] with the fast-recovery server flags plus `extra`. `None` when the backend
/// is skipped (see [`TestDatabase::new`]).
pub async fn setup(backend: Backend, extra: &[&str]) -> Option<Setup> {
    let db = TestDatabase::new(backend).await?;
    let mut args = fast_recovery_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let server = ServerProcess::start(&db, &args).await;
    let client = server.client().await;
    let worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 20, "worker");
    wait_for_registration(&client, "counted").await;
    Some(Setup {
        server,
        client,
        db,
        worker,
    })
}

/// Expands `async fn case(backend: Backend)` functions into one test per case and store:
/// `sqlite::case` and `postgres::case`.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name($crate::Backend::Sqlite).await })* }
        mod postgres { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name($crate::Backend::Postgres).await })* }
    };
}
