//! Fresh, empty databases for test cases: a new SQLite file, or a new database on the
//! PostgreSQL server named by `WAYMARK_TEST_POSTGRES_URL` (which
//! `integration-tests/with-postgres.sh` provides). The store's own suite and the engine's tests
//! of what it composes from the store both take their databases from here.

use std::sync::Arc;

use sqlx::{Connection, PgConnection};

use super::Fixture;
use waymark_store::{postgres::PostgresStore, sqlite::SqliteStore};

/// A new SQLite database file for one case.
pub async fn sqlite() -> Option<Fixture> {
    let path = std::env::temp_dir().join(format!("waymark-test-{}.db", uuid::Uuid::new_v4().simple()));
    let store = SqliteStore::open(&format!("sqlite:{}", path.display()))
        .await
        .expect("open sqlite store");
    Some(Fixture {
        store: Arc::new(store),
        dispose: Box::pin(async move {
            // The WAL and shared-memory files sit beside the database.
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }),
    })
}

const HOW: &str = "run them with `integration-tests/with-postgres.sh cargo test -p waymark-store` \
                   (or `make test`), or set WAYMARK_SKIP_POSTGRES=1 to skip them";

/// A new PostgreSQL database for one case, on the server named by `WAYMARK_TEST_POSTGRES_URL`.
pub async fn postgres() -> Option<Fixture> {
    postgres_database().await.map(|(fixture, _url)| fixture)
}

/// A fixture on a new database, and that database's URL for tests that poke at it directly.
pub async fn postgres_database() -> Option<(Fixture, String)> {
    let Ok(admin_url) = std::env::var("WAYMARK_TEST_POSTGRES_URL") else {
        if std::env::var("WAYMARK_SKIP_POSTGRES").as_deref() == Ok("1") {
            // Under `.ci/run` nothing may skip: a skip there would hide a missing install step.
            assert!(
                std::env::var("WAYMARK_NO_SKIP").as_deref() != Ok("1"),
                "WAYMARK_SKIP_POSTGRES=1 with WAYMARK_NO_SKIP=1: the PostgreSQL tests may not be skipped"
            );
            eprintln!("skipped: WAYMARK_SKIP_POSTGRES=1");
            return None;
        }
        panic!("the PostgreSQL tests need WAYMARK_TEST_POSTGRES_URL: {HOW}");
    };
    let name = format!("wm_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to WAYMARK_TEST_POSTGRES_URL: {e}"));
    // The name is generated from hex digits above, so formatting it into SQL is safe.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let url = database_url(&admin_url, &name);
    let store = PostgresStore::open_with(&url, 16).await.expect("open postgres store");
    let fixture = Fixture {
        store: Arc::new(store),
        dispose: Box::pin(async move {
            // FORCE ends the store's pooled connections, which may still be idle-open.
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
                .execute(&mut admin)
                .await;
            let _ = admin.close().await;
        }),
    };
    Some((fixture, url))
}

/// The admin URL with its database (path) replaced by `db`, keeping any `?options`.
fn database_url(admin_url: &str, db: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (admin_url, String::new()),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}
