//! The production store: PostgreSQL, shared by any number of server replicas.
//!
//! Nothing here is serialized in the process: every method is one or a few statements whose
//! row locks make them safe against other replicas doing the same thing at the same time.
//! - Claims and recovery pick rows with `FOR UPDATE SKIP LOCKED`, so concurrent callers split
//!   the work instead of queueing behind each other.
//! - Fenced writes (`record_step`, `complete_workflow`) are single autocommit statements that
//!   check status and epoch in their WHERE clause; PostgreSQL re-evaluates that clause on the
//!   newest row version when it had to wait for a lock, so a write can never slip in next to an
//!   epoch bump. Only when that statement did nothing do we read to explain why.

use std::time::Duration;

use sqlx::{postgres::PgPoolOptions, PgPool};

mod dialect;

use crate::changes::Change;
use crate::dialect::Conn;

// What PostgreSQL does its own way.
mod announcer;
mod commit;
mod completions;
mod flow;
#[cfg(test)]
mod plan_tests;
mod remote_steps;
mod starts;

use crate::batch::Batcher;
use crate::rows::{db_error, WorkflowRow};
use crate::*;

/// This build's migrations. A database may have more, applied by a newer build; they only
/// added, so this build runs beside them (see [`crate::schema`]).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("migrations/postgres")
};

/// Connections per store unless told otherwise: enough for the dispatcher, the step hot path
/// and the client API at once, small enough that several replicas fit in a default server.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 32;

pub struct PostgresStore {
    pool: PgPool,
    /// Announce changes to other replicas with NOTIFY (see [`crate::changes`]).
    notify: bool,
    /// Group commit for step checkpoints, the hot path.
    steps: Batcher<commit::StepWrite, bool>,
    /// Group commit for completions with no steps to record.
    completions: Batcher<completions::Completion, Option<WorkflowRow>>,
    /// Group commit for starts, one multi-row statement a group (see `postgres/starts.rs`).
    starts: Batcher<(NewWorkflow, Millis), StoreResult<Started>>,
    /// Sends committed changes to the other replicas, batched (see `announcer.rs`).
    announcer: announcer::Announcer,
    /// The changes channel of this store's namespace (see [`crate::changes::channel`]).
    channel: String,
}

/// The schema of namespace `name` (names are `[a-z0-9-]`, so the mapping is one to one and
/// the result needs no quoting); `None` for `default`, which is the public schema.
pub fn namespace_schema(name: &str) -> Option<String> {
    (name != "default").then(|| format!("wm_{}", name.replace('-', "_")))
}

/// Removes namespace `name`'s schema and everything in it.
pub async fn drop_namespace(url: &str, name: &str) -> StoreResult<()> {
    let Some(schema) = namespace_schema(name) else {
        return Err(StoreError::Unavailable("the default namespace is never dropped".into()));
    };
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .map_err(db_error)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
    )))
    .execute(&pool)
    .await
    .map_err(db_error)?;
    pool.close().await;
    Ok(())
}

/// Step-writing lanes: batches in flight at once. More lanes than one keep the database busy
/// while a batch commits; a few suffice because each batch holds everything that queued.
const STEP_LANES: usize = 4;
/// Largest batch of step writes in one statement.
const MAX_STEP_BATCH: usize = 512;
/// Longest a store call waits for a pooled connection: as long as a health ping waits before
/// the database counts as not answering.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and applies the embedded migrations.
    pub async fn open(url: &str) -> StoreResult<PostgresStore> {
        Self::open_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PostgresStore::open`], with at most `max_connections` connections in the pool.
    pub async fn open_with(url: &str, max_connections: u32) -> StoreResult<PostgresStore> {
        Self::open_schema(url, None, max_connections, SchemaPolicy::Migrate).await
    }

    /// Opens the store of namespace `name` (`None`: the default one) with at most
    /// `max_connections` connections, doing about its schema what `policy` says.
    pub async fn open_as(
        url: &str,
        name: Option<&str>,
        max_connections: u32,
        policy: SchemaPolicy,
    ) -> StoreResult<PostgresStore> {
        Self::open_schema(url, name.and_then(namespace_schema), max_connections, policy).await
    }

    /// The store of namespace `name`: its own schema in the database `url` names, made and
    /// migrated if new, with at most `max_connections` connections.
    pub async fn open_namespace(url: &str, name: &str, max_connections: u32) -> StoreResult<PostgresStore> {
        Self::open_schema(url, namespace_schema(name), max_connections, SchemaPolicy::Migrate).await
    }

    async fn open_schema(
        url: &str,
        schema: Option<String>,
        max_connections: u32,
        policy: SchemaPolicy,
    ) -> StoreResult<PostgresStore> {
        // A role that may not change the schema may not create one either.
        if let (Some(s), SchemaPolicy::Migrate) = (&schema, policy) {
            let setup = PgPoolOptions::new()
                .max_connections(1)
                .connect(url)
                .await
                .map_err(db_error)?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA IF NOT EXISTS \"{s}\"")))
                .execute(&setup)
                .await
                .map_err(db_error)?;
            setup.close().await;
        }
        let search_path = schema.clone();
        let pool = PgPoolOptions::new()
            // Every connection of a namespace's pool works in its schema alone.
            .after_connect(move |conn, _| {
                let search_path = search_path.clone();
                Box::pin(async move {
                    if let Some(s) = search_path {
                        sqlx::query(sqlx::AssertSqlSafe(format!("SET search_path TO \"{s}\"")))
                            .execute(conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .max_connections(max_connections.max(1))
            // How long a call waits for a connection before it is answered Unavailable (which
            // clients and workers resend). While the database cannot be reached, every call
            // waits this long: 30 s held each request (and its stream's command) half a minute
            // to say what the health check said after 5. A pool saturated this long is
            // overloaded, and refusing is the right answer there too.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // No ping before each use: it is a round trip on every store call, most of a hot
            // path's latency. A connection that broke while idle fails its next statement
            // instead (Unavailable, which callers retry) and is replaced; connections are also
            // retired after a while so none lives on past a database restart or failover.
            .test_before_acquire(false)
            .max_lifetime(Duration::from_secs(30 * 60))
            .connect(url)
            .await
            .map_err(db_error)?;
        // sqlx holds an advisory lock while migrating, so replicas starting together are safe.
        crate::shared::prepare_schema::<PostgresStore>(&pool, policy).await?;
        let writer = pool.clone();
        let steps = Batcher::spawn(STEP_LANES, MAX_STEP_BATCH, move |batch| {
            commit::insert_steps_fenced(writer.clone(), batch)
        });
        let writer = pool.clone();
        let completions = Batcher::spawn(completions::LANES, completions::MAX_BATCH, move |batch| {
            completions::write(writer.clone(), batch)
        });
        let writer = pool.clone();
        let starts = Batcher::spawn(starts::LANES, crate::shared::starts::MAX_GROUP, move |group| {
            starts::write(writer.clone(), group)
        });
        let channel = crate::changes::channel(schema.as_deref());
        Ok(PostgresStore {
            completions,
            starts,
            announcer: announcer::Announcer::spawn(pool.clone(), channel.clone()),
            channel,
            pool,
            notify: true,
            steps,
        })
    }

    /// Switches NOTIFY off, for PostgreSQL-compatible databases without it: replicas then
    /// learn of each other's changes by polling.
    pub fn with_notify(mut self, notify: bool) -> Self {
        self.notify = notify;
        self
    }
}

/// What the shared SQL needs of this store (the rest is in `dialect.rs`, `commit.rs`, `flow.rs`
/// and `remote_steps.rs`).
impl crate::dialect::Backend for PostgresStore {
    fn reader(&self) -> &PgPool {
        &self.pool
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    /// NOTIFYs the other replicas of a change already committed, off the caller's path and
    /// batched with others (see `announcer.rs`). Not inside the write's transaction on purpose:
    /// PostgreSQL serializes the commits of transactions that NOTIFY, which on hot paths
    /// (completions, starts) would undo group commit. Lost, it is found by the others' polling.
    fn announce_soon(&self, change: Change) {
        if self.notify {
            self.announcer.announce(change);
        }
    }

    /// NOTIFYs the other replicas when the transaction on `conn` commits.
    async fn announce(&self, conn: &mut Conn<Self>, change: Change) -> StoreResult<()> {
        if self.notify {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(&self.channel)
                .bind(change.encode())
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }

    /// Changes other replicas commit, as they commit: LISTEN on a connection of its own.
    async fn changes(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<Change>>> {
        if !self.notify {
            return Ok(None);
        }
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(db_error)?;
        listener.listen(&self.channel).await.map_err(db_error)?;
        let (tx, rx) = tokio::sync::mpsc::channel(crate::changes::MAX_QUEUED);
        tokio::spawn(async move {
            let mut dropping = false;
            loop {
                match listener.recv().await {
                    Ok(n) => {
                        for change in crate::changes::Change::decode_all(n.payload()) {
                            if !crate::changes::offer(&tx, change, &mut dropping) {
                                return;
                            }
                        }
                    }
                    // Reconnects on the next recv; what was missed meanwhile is found by polling.
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        });
        Ok(Some(rx))
    }
}
