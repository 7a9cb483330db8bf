//! What retention costs: the throughput and latency workloads again beside a backlog of old
//! finished workflows (1,000,000 by default), twice — on a server without retention, and on one
//! whose collector deletes them the whole time (`--retention 1d` at its default rate). The
//! difference between the two is the collector's cost; between the first and the plain figures,
//! what a big table costs. The backlog is seeded with one bulk INSERT (a bench fixture) of
//! SUCCESS workflows that finished 30 days ago.

use std::time::Duration;

use anyhow::Context;
use waymark_integration_tests::{free_port, Backend, ServerProcess, TestDatabase};

use crate::{variant::Variant, Args};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// Inserts `n` finished (SUCCESS) workflows whose last change was 30 days ago, named `retired` so
/// the workloads' own reads of their `bench` workflows do not page through them.
async fn seed(backend: Backend, url: &str, n: i64) -> anyhow::Result<()> {
    let then = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64
        - 30 * DAY_MS;
    use sqlx::Connection;
    match backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await?;
            sqlx::query(
                "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, output, created_at, updated_at) \
                 SELECT 'old-' || g, 'retired', 'SUCCESS', 'default', 'null', '10', $1 + g, $1 + g FROM generate_series(1, $2) g",
            )
            .bind(then)
            .bind(n)
            .execute(&mut c)
            .await?;
            // Rows 30 days old were vacuumed long ago in a real database. Without this, the
            // insert-triggered autovacuum of a million fresh rows runs during the workloads and is
            // measured as the cost of the table (or of the collector).
            sqlx::raw_sql("VACUUM (ANALYZE) workflows").execute(&mut c).await?;
            sqlx::raw_sql("CHECKPOINT").execute(&mut c).await?;
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await?;
            sqlx::query(
                "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?2) \
                 INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, output, created_at, updated_at) \
                 SELECT 'old-' || g, 'retired', 'SUCCESS', 'default', 'null', '10', ?1 + g, ?1 + g FROM s",
            )
            .bind(then)
            .bind(n)
            .execute(&mut c)
            .await?;
            // The seed went through the write-ahead log; fold it into the file now rather than
            // in checkpoints during the workloads.
            sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut c).await?;
        }
    }
    Ok(())
}

/// The collector's count of what it deleted so far.
async fn collected(port: u16) -> anyhow::Result<f64> {
    let (_, scrape) = waymark_integration_tests::http_get(port, "/metrics").await?;
    Ok(scrape
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"waymark_workflows_deleted_total{namespace="default",reason="retention"}"#)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0))
}

/// The workloads beside the backlog, without retention and then with the collector deleting it.
pub async fn run(args: &Args, backend: Backend) -> anyhow::Result<Vec<Variant>> {
    Ok(vec![
        run_one(args, backend, false).await?,
        run_one(args, backend, true).await?,
    ])
}

async fn run_one(args: &Args, backend: Backend, retention: bool) -> anyhow::Result<Variant> {
    let db = TestDatabase::new(backend)
        .await
        .ok_or_else(|| anyhow::anyhow!("no database"))?;
    // A first server only creates the tables. The seed is one transaction, and on SQLite a
    // collector would wait for it and count the wait as its own work, so the measured server
    // starts on the seeded database.
    let mut migrate = ServerProcess::start(&db, &[]).await;
    let started = std::time::Instant::now();
    seed(backend, &db.url, args.collecting as i64)
        .await
        .context("seeding old workflows")?;
    migrate.terminate();
    eprintln!(
        "[collecting] {} old workflows seeded in {:.1} s",
        args.collecting,
        started.elapsed().as_secs_f64(),
    );
    let port = free_port();
    let mut flags = vec!["--metrics-listen".to_string(), format!("127.0.0.1:{port}")];
    if retention {
        flags.extend(["--retention".to_string(), "1d".into()]);
    }
    let mut server = ServerProcess::start(&db, &flags).await;
    let before = collected(port).await?;
    let t = std::time::Instant::now();
    let connect = server.connect.clone();
    let measured = crate::variant::measure(args, &connect, &connect).await;
    let during = collected(port).await? - before;
    let secs = t.elapsed().as_secs_f64().max(Duration::from_millis(1).as_secs_f64());
    server.terminate();
    let (steps_per_s, p50_ms, p99_ms) = measured?;
    if !retention {
        anyhow::ensure!(during == 0.0, "{during} deleted without retention");
        return Ok(Variant {
            label: "beside the old workflows, no retention",
            key: "backlogged",
            steps_per_s,
            p50_ms,
            p99_ms,
            note: format!("{} old finished workflows in the table", args.collecting),
            flood: None,
        });
    }
    anyhow::ensure!(during > 0.0, "the collector deleted nothing while the workloads ran");
    Ok(Variant {
        label: "while the retention collector deletes them",
        key: "collecting",
        steps_per_s,
        p50_ms,
        p99_ms,
        note: format!("{during:.0} deleted during the workloads ({:.0}/s)", during / secs),
        flood: None,
    })
}
