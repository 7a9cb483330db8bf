//! Migrations and upgrades: `waymark migrate` brings a schema up (every namespace's), replicas
//! started with `--no-migrate` refuse one that is behind and serve one that is not, a replica
//! keeps serving on a schema that a newer build added to (the expand-only rule), and a rolling
//! restart of two replicas under load, with the newer schema applied half-way, loses nothing.
//!
//! A schema "behind" is made the way it was before the newest migration: its column dropped
//! and its record removed. A newer build's migration is simulated by applying an additive one
//! (a table, a nullable column, its record) by hand, as that build's `waymark migrate` would.
//! Until a release exists there is no older build to run beside this one.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;
use waymark_integration_tests::{
    fast_recovery_args, waymark_bin,
    workload::{all_succeeded, check_exactly_once, start_batch, wait_for_effects},
    Backend, ServerProcess, TestDatabase, WorkerProcess,
};

/// The newest migration, as `server/store/migrations/*/` name it, and what it added.
const NEWEST: i64 = 27;
const UNDO_NEWEST: &str = "ALTER TABLE steps DROP COLUMN started_at";

/// What a newer build's migration might add: a table and a nullable column.
const NEXT: i64 = 9_000;
const NEXT_SQL: [&str; 2] = [
    "CREATE TABLE next_release_feature (id BIGINT PRIMARY KEY, note TEXT)",
    "ALTER TABLE workflows ADD COLUMN next_release_note TEXT",
];

/// Runs `statements` on the database of namespace `namespace` (`None`: the default one).
async fn exec(url: &str, namespace: Option<&str>, statements: &[&str]) {
    if url.starts_with("sqlite:") {
        let url = match namespace {
            Some(n) => waymark_store::sqlite::namespace_url(url, n),
            None => url.to_string(),
        };
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        for s in statements {
            sqlx::query(sqlx::AssertSqlSafe(s.to_string()))
                .execute(&mut c)
                .await
                .unwrap();
        }
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        if let Some(n) = namespace {
            let schema = waymark_store::postgres::namespace_schema(n).unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("SET search_path TO \"{schema}\"")))
                .execute(&mut c)
                .await
                .unwrap();
        }
        for s in statements {
            sqlx::query(sqlx::AssertSqlSafe(s.to_string()))
                .execute(&mut c)
                .await
                .unwrap();
        }
    }
}

/// Takes the newest migration back out of a namespace's schema: as a database an older build
/// left.
async fn undo_newest(url: &str, namespace: Option<&str>) {
    let forget = format!("DELETE FROM _sqlx_migrations WHERE version = {NEWEST}");
    exec(url, namespace, &[UNDO_NEWEST, &forget]).await;
}

/// Applies the simulated next release's migration to a namespace's schema.
async fn apply_next(url: &str, namespace: Option<&str>) {
    let checksum = if url.starts_with("sqlite:") {
        "X'00'"
    } else {
        "decode('00', 'hex')"
    };
    let record = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({NEXT}, 'next release feature', TRUE, {checksum}, 1)"
    );
    let mut all: Vec<&str> = NEXT_SQL.to_vec();
    all.push(&record);
    exec(url, namespace, &all).await;
}

/// `waymark migrate …` against `url`: exit code and standard output.
fn migrate(url: &str, extra: &[&str]) -> (i32, String) {
    let out = Command::new(waymark_bin())
        .args(["migrate", "--database-url", url])
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{text}{err}"))
}

/// Starts `waymark server --no-migrate` and expects it to exit (not serve) within a minute;
/// returns its exit code and standard error.
fn refused_start(url: &str) -> (i32, String) {
    let mut child = Command::new(waymark_bin())
        .args([
            "server",
            "--no-migrate",
            "--database-url",
            url,
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--console-listen", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a --no-migrate server started on a schema that is behind");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One workflow through a worker, start to success.
async fn round_trip(server: &ServerProcess, db: &TestDatabase, prefix: &str) {
    let log = db.dir.join(format!("{prefix}.log"));
    let _worker = WorkerProcess::start(&server.addr, &log, 4, prefix);
    let client = server.client().await;
    let ids = start_batch(&client, prefix, 2, 2, 0).await;
    all_succeeded(&client, &ids, 2).await;
}

async fn an_older_schema_is_refused_until_migrated(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    // A fresh database has no schema: --no-migrate refuses it too.
    let (code, err) = refused_start(&db.url);
    assert_ne!(code, 0);
    assert!(err.contains("waymark migrate"), "{err}");

    // A database an older build left: its default namespace and one more.
    let mut first = ServerProcess::start(&db, &fast_recovery_args()).await;
    first.client().await.create_namespace("tenant").await.unwrap();
    assert_eq!(first.terminate(), Some(0));
    undo_newest(&db.url, None).await;
    undo_newest(&db.url, Some("tenant")).await;

    let (code, err) = refused_start(&db.url);
    assert_ne!(code, 0);
    assert!(err.contains(&format!("missing migrations {NEWEST}")), "{err}");
    assert!(err.contains("waymark migrate"), "{err}");
    let (code, out) = migrate(&db.url, &["--check"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("default\tbehind"), "{out}");

    let (code, out) = migrate(&db.url, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("default\tup to date") && out.contains("tenant\tup to date"),
        "{out}"
    );
    let (code, out) = migrate(&db.url, &["--check"]);
    assert_eq!((code, out.lines().count()), (0, 2), "{out}");
    // Migrating again changes nothing.
    assert_eq!(migrate(&db.url, &[]).0, 0);

    let mut args = fast_recovery_args();
    args.push("--no-migrate".into());
    let server = ServerProcess::start(&db, &args).await;
    round_trip(&server, &db, "after-migrate").await;
    server.assert_log_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_older_schema_is_refused_until_migrated() {
    an_older_schema_is_refused_until_migrated(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_older_schema_is_refused_until_migrated() {
    an_older_schema_is_refused_until_migrated(Backend::Postgres).await
}

async fn a_replica_serves_on_a_schema_a_newer_build_added_to(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let mut server = ServerProcess::start(&db, &fast_recovery_args()).await;
    assert_eq!(server.terminate(), Some(0));
    apply_next(&db.url, None).await;
    // Migrating and checking alike: the extra migration is not this build's business.
    assert_eq!(migrate(&db.url, &["--check"]).0, 0);
    for extra in [None, Some("--no-migrate")] {
        let mut args = fast_recovery_args();
        args.extend(extra.map(String::from));
        let server = ServerProcess::start(&db, &args).await;
        round_trip(&server, &db, &format!("newer-schema-{}", extra.is_some())).await;
        server.assert_log_clean(&[]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_replica_serves_on_a_schema_a_newer_build_added_to() {
    a_replica_serves_on_a_schema_a_newer_build_added_to(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_replica_serves_on_a_schema_a_newer_build_added_to() {
    a_replica_serves_on_a_schema_a_newer_build_added_to(Backend::Postgres).await
}

/// Two replicas (`--no-migrate`) under load; one is stopped, the schema migrated, and it is
/// started again; then the other. Every workflow, started before, during and after, succeeds
/// and no recorded step runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_rolling_upgrade_under_load_loses_nothing() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    assert_eq!(migrate(&db.url, &[]).0, 0, "the schema, by the migrating role");
    let mut args = fast_recovery_args();
    args.push("--no-migrate".into());
    let mut a = ServerProcess::start(&db, &args).await;
    let mut b = ServerProcess::start(&db, &args).await;
    let log = db.dir.join("effects.log");
    let _on_a = WorkerProcess::start(&a.addr, &log, 20, "on-a");
    let _on_b = WorkerProcess::start(&b.addr, &log, 20, "on-b");
    let (via_a, via_b) = (a.client().await, b.client().await);
    let mut ids = start_batch(&via_a, "before", 20, 8, 50).await;
    wait_for_effects(&log, 40).await;

    // A stops (drains); B alone takes starts; the newer build's migration is applied.
    assert_eq!(a.terminate(), Some(0));
    ids.extend(start_batch(&via_b, "a-down", 10, 8, 50).await);
    apply_next(&db.url, None).await;
    a.restart().await;
    ids.extend(start_batch(&via_a, "a-back", 10, 8, 50).await);

    // Then B, on the schema it has never seen, while A takes the starts.
    assert_eq!(b.terminate(), Some(0));
    ids.extend(start_batch(&via_a, "b-down", 10, 8, 50).await);
    b.restart().await;
    ids.extend(start_batch(&via_b, "b-back", 10, 8, 50).await);

    all_succeeded(&via_a, &ids, 8).await;
    // A worker whose replica stopped may have run the step in flight without recording it:
    // once per stop, and a workflow may have been on the worker of each replica in turn.
    check_exactly_once(&via_a, &ids, 8, &log, 2).await;
    a.assert_log_clean(&[]);
    b.assert_log_clean(&[]);
}
