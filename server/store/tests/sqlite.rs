//! The conformance suite against SQLite: each case on its own new database file.

use std::sync::Arc;

use waymark_store::{conformance::Fixture, sqlite::SqliteStore};

async fn fresh() -> Option<Fixture> {
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

waymark_store::conformance_tests!(fresh);
