//! The hot path's statements find their workflow rows through the primary key, even when the
//! statistics say the partial indexes on status are empty.
//!
//! That is what they say after a vacuum taken while nothing ran, and they stay so on a big table
//! (autovacuum waits for a fraction of its rows to change). A plain `status = 'PENDING'` then
//! lets the planner read each row through such an index, scanning every running workflow per
//! lookup (see `status_is!`). The fixture builds that state: many finished rows, vacuumed, then
//! running ones the statistics have not seen.

use sqlx::{Connection, PgConnection};

use super::{commit, completions};
use waymark_store_conformance::{fixtures::postgres_database, Fixture};

/// Indexes whose predicate is a status alone: a lookup by id must never go through one.
const STATUS_INDEXES: [&str; 6] = [
    "workflows_running",
    "workflows_running_by_queue",
    "workflows_running_session",
    "workflows_enqueued",
    "workflows_partitions",
    "workflows_wake_at",
];

/// A new database with stale statistics ([`stale_statistics`]) and a connection to it; `None`
/// when the PostgreSQL tests skip.
async fn stale_database() -> Option<(Fixture, PgConnection)> {
    let (fixture, url) = postgres_database().await?;
    let mut c = PgConnection::connect(&url).await.unwrap();
    stale_statistics(&mut c).await;
    Some((fixture, c))
}

async fn dispose(fixture: Fixture, c: PgConnection) {
    c.close().await.unwrap();
    drop(fixture.store);
    fixture.dispose.await;
}

/// 100,000 finished rows, vacuumed; then 2,000 running ones the statistics have not seen.
async fn stale_statistics(c: &mut PgConnection) {
    for sql in [
        "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, output, created_at, updated_at) \
         SELECT 'old-' || g, 'old', 'SUCCESS', 'q', 'null', '1', g, g FROM generate_series(1, 100000) g",
        "VACUUM (ANALYZE) workflows",
        "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, created_at, updated_at, epoch, worker_id, session_id) \
         SELECT 'run-' || g, 'R', 'PENDING', 'q', 'null', 200000 + g, 200000 + g, 1, 'w', 's' FROM generate_series(1, 2000) g",
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut *c).await.unwrap();
    }
}

/// The plan's lines, as text.
async fn plan<'q>(
    c: &mut PgConnection,
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> String {
    use sqlx::Row;
    query
        .fetch_all(&mut *c)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first index on status a plan reads (`... using NAME on ...`), if any.
fn by_status_index(plan: &str) -> Option<String> {
    plan.split("using ")
        .skip(1)
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
        .find(|index| STATUS_INDEXES.contains(&index.as_str()))
}

#[tokio::test]
async fn lookups_by_id_use_the_primary_key_when_statistics_are_stale() {
    let Some((fixture, mut c)) = stale_database().await else {
        return;
    };

    // The trap is there: the same lookup with a plain status test goes through a status index.
    let plain = plan(
        &mut c,
        sqlx::query("EXPLAIN SELECT 1 FROM workflows WHERE workflow_id = $1 AND status = 'PENDING' AND epoch = 1")
            .bind("run-7"),
    )
    .await;
    assert!(
        by_status_index(&plain).is_some(),
        "the fixture no longer misleads the planner, so this test proves nothing: {plain}"
    );

    let id = || vec!["run-7".to_string()];
    let text = || vec!["x".to_string()];
    let none = || vec![None::<String>];
    let complete = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {}", commit::COMPLETE)))
        .bind("SUCCESS")
        .bind(Some("1"))
        .bind(None::<String>)
        .bind(1_i64)
        .bind("run-7")
        .bind(1_i64)
        .bind(vec![1_i64])
        .bind(text())
        .bind(text())
        .bind(none())
        .bind(vec![1_i64])
        .bind(1_i64)
        .bind(vec![None::<i64>]);
    let steps = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {}", commit::INSERT_STEPS)))
        .bind(id())
        .bind(vec![1_i64])
        .bind(text())
        .bind(text())
        .bind(none())
        .bind(vec![1_i64])
        .bind(vec![1_i64])
        .bind(vec![1_i64])
        .bind(vec![None::<i64>]);
    let completions = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {}", completions::COMPLETE_BATCH)))
        .bind(id())
        .bind(vec![1_i64])
        .bind(vec!["SUCCESS".to_string()])
        .bind(text())
        .bind(none())
        .bind(vec![1_i64]);
    for (name, query) in [("complete", complete), ("steps", steps), ("completions", completions)] {
        let p = plan(&mut c, query).await;
        assert!(
            by_status_index(&p).is_none() && p.contains("workflows_pkey"),
            "{name} does not find its workflow by the primary key:\n{p}"
        );
    }
    dispose(fixture, c).await;
}

/// A retention batch reads its hundred rows and their parents by key, never the whole table.
#[tokio::test]
async fn a_retention_batch_reads_no_whole_table() {
    let Some((fixture, mut c)) = stale_database().await else {
        return;
    };
    let batch = crate::Collect {
        covered: crate::Covered::default(),
        except: vec![crate::Covered {
            statuses: vec![crate::WorkflowStatus::Error],
            ..Default::default()
        }],
        finished_before: 150_000,
        limit: 100,
    };
    let (text, binds) = crate::shared::lifecycle::collect_statement::<super::PostgresStore>(&batch);
    let mut query = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {text}")));
    for b in binds {
        query = query.bind(b);
    }
    let p = plan(&mut c, query.bind(batch.finished_before).bind(100_i64)).await;
    assert!(!p.contains("Seq Scan"), "a retention batch scans a table:\n{p}");
    dispose(fixture, c).await;
}
