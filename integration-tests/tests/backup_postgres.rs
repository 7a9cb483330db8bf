//! PostgreSQL backups with PostgreSQL's own tools, as the operator's guide says: `pg_dump
//! --format=custom` of the server's database while workflows start, run and finish, restored by
//! `pg_restore` into a new database that a server then serves. A namespace (a schema of its own)
//! comes along.

use std::{path::PathBuf, process::Command, time::Duration};

use sqlx::Connection;
use waymark_integration_tests::{
    wait_for_registration, workload::SteadyStarts, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

/// A PostgreSQL client program: on PATH, else in Debian's versioned folder (as
/// `with-postgres.sh` finds the server's).
fn pg_tool(name: &str) -> PathBuf {
    if let Ok(out) = Command::new("sh").args(["-c", &format!("command -v {name}")]).output() {
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !path.is_empty() {
            return PathBuf::from(path);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin").join(name)).collect())
        .unwrap_or_default();
    found.retain(|p| p.exists());
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("{name} not found (PostgreSQL client binaries)"))
}

// Attempt: a server on PostgreSQL under a steady load of three-step workflows, with a second
// namespace; `pg_dump --format=custom` while starts keep coming; `pg_restore` into a new
// database; a server on it with a worker. Outcome: every workflow acknowledged before the dump
// began is in the copy and finishes there, and the namespace came along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_dump_taken_under_load_restores_every_acknowledged_workflow() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    let worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 20, "before");
    wait_for_registration(&client, "counted").await;
    client.create_namespace("blue").await.unwrap();
    let blue = Client::connect_with(&server.connect.clone().namespace("blue"))
        .await
        .unwrap();
    let blue_start = StartOptions {
        allow_unregistered: true,
        ..StartOptions::id("blue-1")
    };
    blue.start_json("counted", serde_json::json!({"steps": 1}), blue_start)
        .await
        .unwrap();

    let load = SteadyStarts::start(&client);
    let before = load.acknowledged(200).await;
    let dump = db.dir.join("waymark.dump");
    let out = tokio::process::Command::new(pg_tool("pg_dump"))
        .args(["--format=custom", "--file", dump.to_str().unwrap(), &db.url])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(load.stop().await > before.len(), "starts went on during the dump");
    drop(worker);
    drop(server);

    // Into a new, empty database, then served with a worker.
    let restored = TestDatabase::new(Backend::Postgres).await.unwrap();
    let out = tokio::process::Command::new(pg_tool("pg_restore"))
        .args([
            "--no-owner",
            "--exit-on-error",
            "--dbname",
            &restored.url,
            dump.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut conn = sqlx::PgConnection::connect(&restored.url).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workflows")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(rows as usize >= before.len(), "{rows} rows restored");
    let server = ServerProcess::start(&restored, &[]).await;
    let client = server.client().await;
    let _worker = WorkerProcess::start(&server.addr, &restored.dir.join("effects.log"), 20, "after");
    for id in &before {
        let w = client.await_workflow(id, Some(PATIENCE)).await.unwrap();
        assert_eq!(w.status, WorkflowStatus::Success, "{id}: {w:?}");
    }
    let blue = Client::connect_with(&server.connect.clone().namespace("blue"))
        .await
        .unwrap();
    assert_eq!(blue.get("blue-1").await.unwrap().workflow_name, "counted");
    println!(
        "{} workflows acknowledged before the dump, all finished from the restored database",
        before.len()
    );
}
