//! `waymark backup`: an embedded database copied while workflows start, run and finish, then
//! restored into a new data directory and served there.

use std::time::Duration;

use waymark_integration_tests::{
    wait_for_registration, waymark_bin, workload::SteadyStarts, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

async fn backup(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(waymark_bin())
        .arg("backup")
        .args(args)
        .output()
        .await
        .unwrap()
}

// Attempt: a server on SQLite under a steady load of three-step workflows, with a second
// namespace; `waymark backup` runs while starts keep coming; then a server on a fresh data
// directory holding only the copy, with a worker. Outcome: every workflow acknowledged before
// the backup began is in the copy and finishes there; the namespace came along; the copy
// refuses to be overwritten; a PostgreSQL URL is refused with the tools to use instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_load_restores_every_acknowledged_workflow() {
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    let worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 20, "before");
    wait_for_registration(&client, "counted").await;
    client.create_namespace("blue").await.unwrap();
    let blue = Client::connect_with(&server.connect.clone().namespace("blue"))
        .await
        .unwrap();
    blue.start_json(
        "counted",
        serde_json::json!({"steps": 1}),
        StartOptions {
            allow_unregistered: true,
            ..StartOptions::id("blue-1")
        },
    )
    .await
    .unwrap();

    // Starts keep coming, before, during and after the backup; each one acknowledged is noted.
    let load = SteadyStarts::start(&client);
    let before = load.acknowledged(200).await;
    let copy = db.dir.join("backup").join("copy.db");
    let out = backup(&[copy.to_str().unwrap(), "--database-url", &db.url]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(load.stop().await > before.len(), "starts went on during the backup");
    assert!(listed.starts_with("default\t") && listed.contains("blue\t"), "{listed}");
    let blue_copy = db.dir.join("backup").join("copy.blue.db");
    assert!(blue_copy.exists(), "{listed}");

    // A second backup to the same place is refused, and nothing is overwritten.
    let len = std::fs::metadata(&copy).unwrap().len();
    let again = backup(&[copy.to_str().unwrap(), "--database-url", &db.url]).await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwrites"));
    assert_eq!(std::fs::metadata(&copy).unwrap().len(), len);
    drop(worker);
    drop(server);

    // The copy alone, in a new data directory, served with a worker.
    let restored = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let file = restored.url.trim_start_matches("sqlite:");
    std::fs::copy(&copy, file).unwrap();
    let blue_file = file.replace("waymark.db", "waymark.blue.db");
    std::fs::copy(&blue_copy, &blue_file).unwrap();
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
        "{} workflows acknowledged before the backup, all finished from the copy",
        before.len()
    );

    // The operator's guide's command, as written, from a directory whose .waymark is this database's.
    let guide = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operators/backup.md");
    let text = std::fs::read_to_string(guide).unwrap();
    let sqlite = text.find("\n## SQLite\n").expect("a SQLite section in the guide");
    let section = &text[sqlite..];
    let line = section
        .lines()
        .find(|l| l.starts_with("waymark backup "))
        .expect("the guide's backup command");
    let cwd = restored.dir.join("readme");
    std::fs::create_dir_all(&cwd).unwrap();
    std::os::unix::fs::symlink(&restored.dir, cwd.join(".waymark")).unwrap();
    let out = tokio::process::Command::new(waymark_bin())
        .args(line.split_whitespace().skip(1))
        .current_dir(&cwd)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(cwd.join("backups/waymark-copy.db").exists());
    assert!(cwd.join("backups/waymark-copy.blue.db").exists());

    // PostgreSQL has its own tools.
    let pg = backup(&["x.db", "--database-url", "postgres://u@127.0.0.1/db"]).await;
    assert_eq!(pg.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&pg.stderr).contains("pg_dump"));
}
