//! Where a namespace's data lives: on PostgreSQL a schema of the server's database, on SQLite a
//! database file beside the server's (see `waymark_store::{postgres, sqlite}::open_namespace`).

use std::sync::Arc;

use waymark_store::{postgres::PostgresStore, sqlite::SqliteStore, Store};

use crate::engine::EngineResult;

#[derive(Debug, Clone)]
pub enum Storage {
    Sqlite {
        url: String,
    },
    Postgres {
        url: String,
        notify: bool,
        /// Connections of each namespace's pool but `default`'s (`--db-namespace-pool-size`):
        /// namespaces share one PostgreSQL server.
        pool_size: u32,
    },
}

impl Storage {
    /// The storage of the database `url` names (the `default` namespace's).
    pub fn for_url(url: &str, notify: bool, pool_size: u32) -> Storage {
        if url.starts_with("sqlite:") {
            Storage::Sqlite { url: url.to_string() }
        } else {
            Storage::Postgres {
                url: url.to_string(),
                notify,
                pool_size,
            }
        }
    }

    /// Opens namespace `name`'s store, making and migrating it if new.
    pub async fn open(&self, name: &str) -> EngineResult<Arc<dyn Store>> {
        Ok(match self {
            Storage::Sqlite { url } => Arc::new(SqliteStore::open_namespace(url, name).await?),
            Storage::Postgres { url, notify, pool_size } => Arc::new(
                PostgresStore::open_namespace(url, name, *pool_size)
                    .await?
                    .with_notify(*notify),
            ),
        })
    }

    /// Removes namespace `name`'s data for good.
    pub async fn drop(&self, name: &str) -> EngineResult<()> {
        match self {
            Storage::Sqlite { url } => waymark_store::sqlite::drop_namespace(url, name)?,
            Storage::Postgres { url, .. } => waymark_store::postgres::drop_namespace(url, name).await?,
        }
        Ok(())
    }
}
