//! The SQL both backends run, written once and compiled once: generic over the backend
//! ([`Backend`]), saying what differs through its [`Dialect`] (row locks, lists bound as one
//! parameter). Placeholders are `$N` on both drivers. What a backend does its own way (group
//! commit, starts, sends that deliver at once, claims of remote steps) stays in its own folder,
//! behind the `Backend` trait's methods.

use crate::dialect::{Backend, Dialect};
use crate::rows::db_error;
use crate::*;

/// Ends `tx` at once, keeping nothing, and hands back `answer`. Dropping a transaction rolls it
/// back as well, but later: the pool sends the rollback from a task of its own when it takes the
/// connection back, and until then the rows the transaction locked stay locked, so a claim
/// (`SKIP LOCKED`) passes a requeued workflow by as if it were taken. Every early return of a
/// transaction that read under a lock goes through here.
pub(crate) async fn let_go<DB: sqlx::Database, T>(tx: sqlx::Transaction<'_, DB>, answer: T) -> T {
    // A rollback that fails leaves a broken connection, which the pool closes on its return.
    let _ = tx.rollback().await;
    answer
}

/// `?` inside a transaction whose refusals are ordinary answers (a stale fence, a missing row):
/// the transaction is let go of before the error is returned.
macro_rules! held {
    ($tx:ident, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return super::let_go($tx, Err(e)).await,
        }
    };
}

/// Brings the schema of the database `pool` reaches to what this build needs, as `policy`
/// says (see [`crate::schema`]).
pub(crate) async fn prepare_schema<B: Dialect>(pool: &sqlx::Pool<B::Db>, policy: SchemaPolicy) -> StoreResult<()> {
    match policy {
        SchemaPolicy::Migrate => B::migrate(pool)
            .await
            .map_err(|e| StoreError::Unavailable(format!("applying migrations: {e}"))),
        SchemaPolicy::Expect => {
            let read = B::query_as("SELECT version, checksum FROM _sqlx_migrations WHERE success")
                .fetch_all(pool)
                .await;
            let applied = match read {
                Ok(rows) => Some(rows),
                // PostgreSQL's undefined_table; SQLite says so in words.
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some("42P01") || e.message().contains("no such table") =>
                {
                    None
                }
                Err(e) => return Err(db_error(e)),
            };
            crate::schema::expect_applied(B::MIGRATOR, applied)
        }
    }
}

pub(crate) mod children;
pub(crate) mod events;
pub(crate) mod fencing;
pub(crate) mod keys;
pub(crate) mod lifecycle;
pub(crate) mod limited;
pub(crate) mod messages;
pub(crate) mod namespaces;
pub(crate) mod parking;
pub(crate) mod queues;
pub(crate) mod remote_steps;
pub(crate) mod runs;
pub(crate) mod schedules;
pub(crate) mod starts;
pub(crate) mod steps;
pub(crate) mod streams;
pub(crate) mod transaction;
pub(crate) mod workers;
pub(crate) mod workflows;

#[async_trait::async_trait]
impl<B: Backend> Store for B {
    fn backend(&self) -> &'static str {
        B::NAME
    }

    #[tracing::instrument(name = "store.ping", level = "debug", target = "waymark::store", skip_all)]
    async fn ping(&self) -> StoreResult<()> {
        B::query("SELECT 1").execute(self.reader()).await.map_err(db_error)?;
        Ok(())
    }

    #[tracing::instrument(
        name = "store.pending_migrations",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn pending_migrations(&self) -> StoreResult<usize> {
        let applied: Vec<i64> = B::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        Ok(B::MIGRATOR.iter().filter(|m| !applied.contains(&m.version)).count())
    }

    fn connections(&self) -> Connections {
        let mut pools = vec![self.writer()];
        if !std::ptr::eq(self.writer(), self.reader()) {
            pools.push(self.reader());
        }
        let mut c = Connections::default();
        for p in pools {
            c.open += p.size();
            c.idle += p.num_idle() as u32;
        }
        c
    }

    #[tracing::instrument(name = "store.subscribe", level = "debug", target = "waymark::store", skip_all)]
    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<crate::changes::Change>>> {
        self.changes().await
    }

    #[tracing::instrument(name = "store.begin", level = "debug", target = "waymark::store", skip_all)]
    async fn begin(&self, now: Millis) -> StoreResult<Box<dyn Transaction + '_>> {
        transaction::begin_at(self, now).await
    }
}
