//! The conformance suite against PostgreSQL: each case in its own new database on the server
//! named by WAYMARK_TEST_POSTGRES_URL (which `integration-tests/with-postgres.sh` provides).

use sqlx::{Connection, PgConnection};
use waymark_store_conformance::fixtures::postgres_database as fresh_database;

waymark_store_conformance::conformance_tests!(waymark_store_conformance::fixtures::postgres);

/// PostgreSQL-specific: the step fast path must lock the workflow row (`FOR SHARE`). Without
/// the lock its snapshot still shows the old PENDING row while a requeue or re-dispatch is
/// uncommitted, and the stale step lands beside the new dispatch. The conformance race case
/// rarely hits that window; holding the requeue open here makes it certain.
#[tokio::test]
async fn step_write_waits_for_an_uncommitted_requeue() {
    use std::time::Duration;
    use waymark_store::{Claim, Fence, NewStep, NewWorkflow, Outcome, StoreError, WorkflowStatus};

    let Some((fixture, url)) = fresh_database().await else {
        return;
    };
    let s = fixture.store.clone();
    let t = waymark_store_conformance::T;
    let new = NewWorkflow {
        workflow_id: "w".into(),
        workflow_name: "A".into(),
        queue_name: "q".into(),
        app_version: None,
        input: "{}".into(),
        parent_workflow_id: None,
        deadline_at: None,
        priority: 0,
        assign: None,
        ..Default::default()
    };
    s.start_workflow(new, t).await.unwrap();
    let claim = Claim {
        worker_id: "A".into(),
        session_id: "A/stream-1".into(),
        app_version: "v1".into(),
        workflow_names: vec!["A".into()],
        queues: vec!["q".into()],
        limit: 1,
    };
    assert_eq!(s.claim_workflows(&claim, t).await.unwrap().len(), 1);

    // Another replica is requeueing the workflow and has not committed yet.
    let mut other = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query("UPDATE workflows SET status = 'ENQUEUED' WHERE workflow_id = 'w'")
        .execute(&mut other)
        .await
        .unwrap();

    let write = tokio::spawn({
        let s = s.clone();
        async move {
            let fence = Fence {
                workflow_id: "w".into(),
                epoch: 1,
            };
            let step = NewStep {
                step_id: 0,
                name: "s".into(),
                outcome: Outcome::Output("1".into()),
                attempts: 1,
                started_at: None,
            };
            s.record_step(&fence, step, t + 1).await
        }
    });
    // Wait until the write either finished or is visibly blocked on a row lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
            .fetch_one(&mut other)
            .await
            .unwrap();
        if waiting > 0 || write.is_finished() || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !write.is_finished(),
        "the step write did not wait for the requeue's row lock"
    );
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    match write.await.unwrap() {
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Enqueued,
            ..
        }) => {}
        other => panic!("expected NotRunning after the requeue committed, got {other:?}"),
    }
    assert!(s.list_steps("w").await.unwrap().is_empty());
    drop(s);
    drop(fixture.store);
    fixture.dispose.await;
}

/// PostgreSQL-specific: replicas do not look for work after every finished workflow; a finish
/// that puts a workflow parked on it back in its queue announces that itself (the wake trigger's
/// NOTIFY, which PostgreSQL delivers before the Finished announcement sent after the commit).
#[tokio::test]
async fn a_finish_that_wakes_a_parked_workflow_announces_enqueued_work() {
    use std::time::Duration;
    use waymark_store::{changes::Change, Assignment, Fence, NewWorkflow, Outcome, ParkedOn};

    let Some((fixture, _url)) = fresh_database().await else {
        return;
    };
    let s = fixture.store.clone();
    let t = waymark_store_conformance::T;
    let mut changes = s.subscribe().await.unwrap().expect("PostgreSQL announces changes");
    let running = |id: &str| NewWorkflow {
        workflow_id: id.into(),
        workflow_name: "A".into(),
        queue_name: "q".into(),
        input: "{}".into(),
        assign: Some(Assignment {
            worker_id: "A".into(),
            session_id: "A/stream-1".into(),
            app_version: "v1".into(),
        }),
        ..Default::default()
    };
    let fence = |id: &str| Fence {
        workflow_id: id.into(),
        epoch: 1,
    };
    // Collects announcements until `id`'s Finished; whether an Enqueued came before it.
    async fn enqueued_before_finished(changes: &mut tokio::sync::mpsc::Receiver<Change>, id: &str) -> bool {
        let mut enqueued = false;
        loop {
            let change = tokio::time::timeout(Duration::from_secs(30), changes.recv())
                .await
                .unwrap_or_else(|_| panic!("no Finished announcement for {id} within 30 s"))
                .expect("the listener stays up");
            match change {
                Change::Enqueued { .. } => enqueued = true,
                Change::Finished { workflow_id } if workflow_id == id => return enqueued,
                _ => {}
            }
        }
    }

    // Nobody waits on this one: its finish announces no work.
    s.start_workflow(running("alone"), t).await.unwrap();
    s.complete_workflow(&fence("alone"), Outcome::Output("1".into()), t + 1)
        .await
        .unwrap();
    assert!(!enqueued_before_finished(&mut changes, "alone").await);

    // A parent parked on its child goes back to its queue when the child finishes: announced.
    s.start_workflow(running("parent"), t).await.unwrap();
    s.start_workflow(running("child"), t).await.unwrap();
    let on = ParkedOn::Workflow("child".into());
    assert!(s.park(&fence("parent"), 0, i64::MAX, &on, t + 2).await.unwrap());
    s.complete_workflow(&fence("child"), Outcome::Output("2".into()), t + 3)
        .await
        .unwrap();
    assert!(enqueued_before_finished(&mut changes, "child").await);
    drop(changes);
    drop(s);
    drop(fixture.store);
    fixture.dispose.await;
}

/// PostgreSQL-specific: the trigger that wakes workflows parked on a finished one looks them up
/// by key, whatever else is parked. Planned once for any key, its UPDATE was sized by the
/// commonest parked_on value (timers, when many workflows sleep) and scanned the whole table on
/// every finish. Counted in the transaction's own statistics: no sequential scans.
#[tokio::test]
async fn finishing_workflows_does_not_scan_the_workflows_parked_on_timers() {
    let Some((fixture, url)) = fresh_database().await else {
        return;
    };
    let mut c = PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, created_at, updated_at, parked_on, wake_at) \
         SELECT 'sleeper-' || g, 'S', 'DELAYED', 'q', 'null', g, g, 'timer', 4000000000000 FROM generate_series(1, 20000) g",
    )
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, created_at, updated_at, epoch) \
         SELECT 'running-' || g, 'R', 'PENDING', 'q', 'null', g, g, 1 FROM generate_series(1, 50) g",
    )
    .execute(&mut c)
    .await
    .unwrap();
    sqlx::query("ANALYZE workflows").execute(&mut c).await.unwrap();
    sqlx::query("BEGIN").execute(&mut c).await.unwrap();
    // One statement per finish, as completions come: each runs the trigger once.
    for g in 1..=50 {
        sqlx::query("UPDATE workflows SET status = 'SUCCESS', updated_at = 1 WHERE workflow_id = $1")
            .bind(format!("running-{g}"))
            .execute(&mut c)
            .await
            .unwrap();
    }
    let scans: i64 =
        sqlx::query_scalar("SELECT coalesce(seq_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = 'workflows'")
            .fetch_one(&mut c)
            .await
            .unwrap();
    sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
    c.close().await.unwrap();
    assert_eq!(
        scans, 0,
        "finishing 50 workflows scanned the workflows table {scans} times"
    );
    drop(fixture.store);
    fixture.dispose.await;
}

/// PostgreSQL-specific: replicas on one database take turns collecting. While another
/// transaction holds the collector's lock (as a replica mid-batch does), a batch is skipped —
/// `None`, nothing deleted — and once it is released the next batch runs.
#[tokio::test]
async fn the_retention_collector_skips_its_turn_while_another_replica_collects() {
    use waymark_store::{Collect, Covered, NewWorkflow, WorkflowStatus};

    let Some((fixture, url)) = fresh_database().await else {
        return;
    };
    let s = fixture.store.clone();
    let t = waymark_store_conformance::T;
    let new = NewWorkflow {
        workflow_id: "done".into(),
        workflow_name: "A".into(),
        queue_name: "q".into(),
        input: "{}".into(),
        ..Default::default()
    };
    s.start_workflow(new, t).await.unwrap();
    s.cancel_workflow("done", t + 1).await.unwrap();
    let batch = Collect {
        covered: Covered::default(),
        except: Vec::new(),
        finished_before: t + 1_000,
        limit: 10,
    };
    let mut other = PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut other).await.unwrap();
    let held: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtextextended('collector ' || current_schema(), 0))")
            .fetch_one(&mut other)
            .await
            .unwrap();
    assert!(held, "the other replica takes the collector's lock");
    assert_eq!(s.collect_finished(&batch).await.unwrap(), None, "its turn is skipped");
    assert_eq!(
        s.get_workflow("done").await.unwrap().map(|w| w.status),
        Some(WorkflowStatus::Cancelled)
    );
    sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    assert_eq!(
        s.collect_finished(&batch).await.unwrap(),
        Some(vec!["done".to_string()])
    );
    drop(s);
    drop(fixture.store);
    fixture.dispose.await;
}

/// Every table whose rows go with their workflow (`ON DELETE CASCADE`) must find a workflow's
/// rows through an index: the cascade runs once per deleted workflow, and a sequential scan
/// there makes DeleteWorkflow and the retention collector read the whole table each time.
#[tokio::test]
async fn deleting_a_workflow_finds_its_rows_by_index_in_every_table() {
    let Some((_fixture, url)) = fresh_database().await else {
        return;
    };
    let mut c = PgConnection::connect(&url).await.unwrap();
    let owned: Vec<String> = sqlx::query_scalar(
        "SELECT conrelid::regclass::text FROM pg_constraint \
         WHERE confrelid = 'workflows'::regclass AND contype = 'f' AND confdeltype = 'c' ORDER BY 1",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert!(owned.len() >= 7 && owned.contains(&"messages".to_string()), "{owned:?}");
    // With sequential scans priced out, a plan still scans only when no index can serve it.
    sqlx::query("SET enable_seqscan = off").execute(&mut c).await.unwrap();
    for table in &owned {
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "EXPLAIN DELETE FROM {table} WHERE workflow_id = 'x'"
        )))
        .fetch_all(&mut c)
        .await
        .unwrap();
        assert!(
            !plan.iter().any(|l| l.contains("Seq Scan")),
            "{table} is scanned for a workflow's rows: {plan:?}"
        );
    }
}
