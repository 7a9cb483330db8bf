//! The raw baseline: single-row durable inserts, one row per commit, straight to the database;
//! what the throughput ratio divides by. One run is noisy and a disk's speed drifts during a
//! long bench, so it runs `RUNS` times before the workloads and `RUNS` times after them, each
//! time on a fresh database of its own (an empty table, nothing else in it), and the ratio uses
//! the median of them all.

use std::{
    str::FromStr,
    sync::{atomic::Ordering, Arc},
    time::{Duration, Instant},
};

use waymark_integration_tests::{Backend, TestDatabase};

/// Runs before the workloads, and again after them.
pub const RUNS: usize = 3;

/// Fewer rows than this and a run is too short to stand for the disk (a few seconds on
/// PostgreSQL); the report says so.
pub const REFERENCE_ROWS: i64 = 30_000;

pub struct Baseline {
    pub rows: i64,
    pub conns: u32,
    /// Inserts/s of each run, in the order run.
    pub before: Vec<f64>,
    pub after: Vec<f64>,
}

impl Baseline {
    /// The median of every run, before and after: what the ratio divides by.
    pub fn per_s(&self) -> f64 {
        median(self.before.iter().chain(&self.after).copied().collect())
    }
}

/// The middle value; the mean of the two middle ones for an even count.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// `RUNS` runs of `rows` inserts, each on a new database; (connections, inserts/s of each run).
pub async fn runs(backend: Backend, rows: i64) -> anyhow::Result<(u32, Vec<f64>)> {
    let mut conns = 0;
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let db = TestDatabase::new(backend)
            .await
            .ok_or_else(|| anyhow::anyhow!("raw baseline: no database"))?;
        let (c, per_s) = raw_inserts(backend, &db.url, rows).await?;
        // The SQLite file is of no further use (a PostgreSQL database goes with its cluster).
        let _ = std::fs::remove_dir_all(&db.dir);
        conns = c;
        rates.push(per_s);
    }
    Ok((conns, rates))
}

const PAYLOAD: &str = "bench-raw-payload-0123456789abcdefghijklmnopqrstuvwxyz";

/// Single-row inserts, one per commit (autocommit), `conns` at once. Returns rows/s.
async fn raw_inserts(backend: Backend, url: &str, rows: i64) -> anyhow::Result<(u32, f64)> {
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
                .create_if_missing(true)
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

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0, 6.0, 5.0]), 3.5);
    }
}
