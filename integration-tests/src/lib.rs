//! Test harness for end-to-end tests and the load generator: real `waymark` server processes,
//! real worker processes, real PostgreSQL databases, and waits on conditions (never on time).

use std::{
    net::TcpListener,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

pub mod certs;
pub mod golden;
pub mod grpc_web;
pub mod log_check;
pub mod otlp;
pub mod polyglot;
pub mod postgres_cluster;
pub mod raw_worker;
pub mod side_effects;
pub mod workload;

mod server_process;
mod worker_process;

pub use server_process::{fast_recovery_args, fast_server, keyed_server, secured_server, signal, ServerProcess};
pub use worker_process::WorkerProcess;

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
/// Runs `waymark ARGS` against the server at `addr`: its exit code, standard output and error.
pub fn run_cli(addr: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(waymark_bin())
        .args(args)
        .env("WAYMARK_SERVER", addr)
        .output()
        .expect("run waymark");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

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
        "{} not found: build it first with `cargo build -p waymark-cli` (make test does)",
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

/// `GET path` over plain HTTP/1.1 on a local port (the server's metrics listener): the status
/// code and the body.
pub async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http_get_with(port, path, None).await
}

/// The `waymark_waits` gauge of `namespace` in a scrape of the metrics listener on `port`
/// (`None` until the listener answers and the series is there).
pub async fn waits_gauge(port: u16, namespace: &str) -> Option<u64> {
    let (_, scrape) = http_get(port, "/metrics").await.ok()?;
    let series = format!("waymark_waits{{namespace=\"{namespace}\"}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()).and_then(|v| v.trim().parse().ok()))
}

/// `GET path` presenting `bearer` as `authorization: Bearer <bearer>`.
pub async fn http_get_with(port: u16, path: &str, bearer: Option<&str>) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let authorization = bearer.map_or(String::new(), |b| format!("Authorization: Bearer {b}\r\n"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{authorization}Connection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await?;
    let status = raw.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
