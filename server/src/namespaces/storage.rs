//! Where a namespace's data lives: on PostgreSQL a schema of the server's database, on SQLite a
//! database file beside the server's (see `waymark_store::{postgres, sqlite}::open_namespace`).

use std::sync::Arc;

use waymark_store::{postgres::PostgresStore, sqlite::SqliteStore, SchemaPolicy, Store};

use crate::engine::EngineResult;

#[derive(Debug, Clone)]
pub enum Storage {
    Sqlite {
        url: String,
        schema: SchemaPolicy,
    },
    Postgres {
        url: String,
        notify: bool,
        /// Connections of each namespace's pool but `default`'s (`--db-namespace-pool-size`):
        /// namespaces share one PostgreSQL server.
        pool_size: u32,
        schema: SchemaPolicy,
    },
}

impl Storage {
    /// The storage of the database `url` names (the `default` namespace's).
    pub fn for_url(url: &str, notify: bool, pool_size: u32, schema: SchemaPolicy) -> Storage {
        if url.starts_with("sqlite:") {
            Storage::Sqlite {
                url: url.to_string(),
                schema,
            }
        } else {
            Storage::Postgres {
                url: url.to_string(),
                notify,
                pool_size,
                schema,
            }
        }
    }

    /// Opens namespace `name`'s store, making and migrating it if new (with `--no-migrate`,
    /// only one whose schema a replica that may change it made).
    pub async fn open(&self, name: &str) -> EngineResult<Arc<dyn Store>> {
        Ok(match self {
            Storage::Sqlite { url, schema } => Arc::new(SqliteStore::open_as(url, Some(name), *schema).await?),
            Storage::Postgres {
                url,
                notify,
                pool_size,
                schema,
            } => Arc::new(
                PostgresStore::open_as(url, Some(name), *pool_size, *schema)
                    .await?
                    .with_notify(*notify),
            ),
        })
    }

    /// Removes namespace `name`'s data for good.
    pub async fn drop(&self, name: &str) -> EngineResult<()> {
        match self {
            Storage::Sqlite { url, .. } => waymark_store::sqlite::drop_namespace(url, name)?,
            Storage::Postgres { url, .. } => waymark_store::postgres::drop_namespace(url, name).await?,
        }
        Ok(())
    }
}
