//! The raw baseline: single-row durable inserts, one row per commit, straight to the database.

use std::{
    str::FromStr,
    sync::{atomic::Ordering, Arc},
    time::{Duration, Instant},
};

use waymark_integration_tests::Backend;

const PAYLOAD: &str = "bench-raw-payload-0123456789abcdefghijklmnopqrstuvwxyz";

/// Single-row inserts, one per commit (autocommit), `conns` at once. Returns rows/s.
pub async fn raw_inserts(backend: Backend, url: &str, rows: i64) -> anyhow::Result<(u32, f64)> {
    let next = Arc::new(std::sync::atomic::AtomicI64::new(0));
    match backend {
        Backend::Postgres => {
            let conns = 32u32;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(conns)
                .min_connections(conns)
                .connect(url)
                .await?;
            sqlx::query("CREATE TABLE bench_raw (id bigint PRIMARY KEY, payload text)")
                .execute(&pool)
                .await?;
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let (pool, next) = (pool.clone(), next.clone());
                tasks.push(tokio::spawn(async move {
                    let mut conn = pool.acquire().await?;
                    loop {
                        let id = next.fetch_add(1, Ordering::Relaxed);
                        if id >= rows {
                            return Ok::<_, anyhow::Error>(());
                        }
                        sqlx::query("INSERT INTO bench_raw (id, payload) VALUES ($1, $2)")
                            .bind(id)
                            .bind(PAYLOAD)
                            .execute(&mut *conn)
                            .await?;
                    }
                }));
            }
            for t in tasks {
                t.await??;
            }
            let secs = t0.elapsed().as_secs_f64();
            pool.close().await;
            Ok((conns, rows as f64 / secs))
        }
        Backend::Sqlite => {
            use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
            let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
            let options = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))?
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(30));
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?;
            sqlx::query("CREATE TABLE bench_raw (id bigint PRIMARY KEY, payload text)")
                .execute(&pool)
                .await?;
            let t0 = Instant::now();
            for id in 0..rows {
                sqlx::query("INSERT INTO bench_raw (id, payload) VALUES (?1, ?2)")
                    .bind(id)
                    .bind(PAYLOAD)
                    .execute(&pool)
                    .await?;
            }
            let secs = t0.elapsed().as_secs_f64();
            pool.close().await;
            Ok((1, rows as f64 / secs))
        }
    }
}
