//! `waymark-test-seed --database-url URL --workflows N`: fills a database (made and migrated
//! here if new) with N finished workflows, for tests and benchmarks that need a big table — the
//! console's browser test times its pages on a million. A test fixture, not a product command:
//! it writes the tables directly, in one statement.
//!
//! The rows: ids `seed-<i>`, names `seeded-0`..`seeded-7`, SUCCESS, on the default queue, made
//! 10 ms apart and ending over an hour before now, so anything a test starts afterwards is newer
//! than all of them.

use sqlx::Connection;

const SPACING_MS: i64 = 10;

#[derive(clap::Parser)]
struct Args {
    /// `sqlite:<path>` or `postgres://…`.
    #[arg(long)]
    database_url: String,
    #[arg(long, default_value_t = 1_000_000)]
    workflows: i64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let from = now - 3_600_000 - args.workflows * SPACING_MS;
    let url = args.database_url.as_str();
    let started = std::time::Instant::now();
    if let Some(path) = url.strip_prefix("sqlite:") {
        // Opening the store creates the file and applies the migrations.
        drop(waymark_store::sqlite::SqliteStore::open(url).await?);
        let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{path}")).await?;
        sqlx::query(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?2) \
             INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, output, created_at, updated_at) \
             SELECT 'seed-' || g, 'seeded-' || (g % 8), 'SUCCESS', 'default', '{\"n\":' || g || '}', '\"done\"', \
                    ?1 + g * ?3, ?1 + g * ?3 + 5 FROM s",
        )
        .bind(from)
        .bind(args.workflows)
        .bind(SPACING_MS)
        .execute(&mut c)
        .await?;
        sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut c).await?;
    } else {
        drop(waymark_store::postgres::PostgresStore::open(url).await?);
        let mut c = sqlx::PgConnection::connect(url).await?;
        sqlx::query(
            "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, output, created_at, updated_at) \
             SELECT 'seed-' || g, 'seeded-' || (g % 8), 'SUCCESS', 'default', '{\"n\":' || g || '}', '\"done\"', \
                    $1 + g * $3, $1 + g * $3 + 5 FROM generate_series(1, $2) g",
        )
        .bind(from)
        .bind(args.workflows)
        .bind(SPACING_MS)
        .execute(&mut c)
        .await?;
        sqlx::raw_sql("VACUUM (ANALYZE) workflows").execute(&mut c).await?;
    }
    eprintln!(
        "seeded {} workflows in {:.1} s",
        args.workflows,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
