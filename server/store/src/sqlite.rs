//! The embedded store: one SQLite file in WAL mode.
//!
//! SQLite lets one writer in at a time, so writes go through a pool of exactly one connection:
//! they queue in the process instead of failing with SQLITE_BUSY, and a transaction on it sees
//! everything before it. Reads use their own small pool and never wait for writers (WAL).
//! `synchronous = FULL`: a step acknowledged to a worker survives a power cut, not just a crash.

use std::{str::FromStr, time::Duration};

use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};

mod dialect;

use crate::changes::Change;
use crate::dialect::Conn;

// What SQLite does its own way.
pub mod backup;
mod commit;
mod flow;
mod remote_steps;

use crate::batch::Batcher;
use crate::rows::db_error;
use crate::*;

/// Largest batch of step checkpoints in one transaction.
const MAX_STEP_BATCH: usize = 256;

/// This build's migrations. A database may have more, applied by a newer build; they only
/// added, so this build runs beside them (see [`crate::schema`]).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("migrations/sqlite")
};

pub struct SqliteStore {
    write: SqlitePool,
    read: SqlitePool,
    /// Group commit for step checkpoints: concurrent ones share one transaction, so one fsync.
    steps: Batcher<(Fence, NewStep, Millis), StoreResult<Recorded>>,
    /// Group commit for starts (see [`crate::shared::starts::start_group`]).
    starts: Batcher<(NewWorkflow, Millis), StoreResult<Started>>,
    /// Senders of the change channels handed out; kept so the channels stay open.
    silent: std::sync::Mutex<Vec<tokio::sync::mpsc::Sender<crate::changes::Change>>>,
}

/// The URL of namespace `name`'s database: `dir/waymark.db` becomes `dir/waymark.<name>.db`
/// (names are `[a-z0-9-]`, so no two namespaces share a file); `default` is `url` itself.
pub fn namespace_url(url: &str, name: &str) -> String {
    if name == "default" {
        return url.to_string();
    }
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, format!("?{q}")),
        None => (url, String::new()),
    };
    match path
        .rsplit_once('.')
        .filter(|(stem, ext)| !ext.contains('/') && !stem.ends_with('/'))
    {
        Some((stem, ext)) => format!("{stem}.{name}.{ext}{query}"),
        None => format!("{path}.{name}{query}"),
    }
}

/// Removes namespace `name`'s database files (the database, its WAL and shared memory).
pub fn drop_namespace(url: &str, name: &str) -> StoreResult<()> {
    if name == "default" {
        return Err(StoreError::Unavailable("the default namespace is never dropped".into()));
    }
    let url = namespace_url(url, name);
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or(path);
    for suffix in ["", "-wal", "-shm"] {
        match std::fs::remove_file(format!("{path}{suffix}")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::Unavailable(format!("cannot remove {path}{suffix}: {e}"))),
        }
    }
    Ok(())
}

impl SqliteStore {
    /// The store of namespace `name`: a database file of its own beside the one `url` names
    /// (see [`namespace_url`]), made and migrated if new.
    pub async fn open_namespace(url: &str, name: &str) -> StoreResult<SqliteStore> {
        Self::open(&namespace_url(url, name)).await
    }

    /// Opens the store of namespace `name` (`None`: the default one), doing about its schema
    /// what `policy` says.
    pub async fn open_as(url: &str, name: Option<&str>, policy: SchemaPolicy) -> StoreResult<SqliteStore> {
        match name {
            Some(name) => Self::open_with(&namespace_url(url, name), policy).await,
            None => Self::open_with(url, policy).await,
        }
    }

    /// Opens (creating if needed) the database at `url` (`sqlite:path` or `sqlite://path`) and
    /// applies the embedded migrations.
    pub async fn open(url: &str) -> StoreResult<SqliteStore> {
        Self::open_with(url, SchemaPolicy::Migrate).await
    }

    /// [`SqliteStore::open`], doing about the schema what `policy` says.
    pub async fn open_with(url: &str, policy: SchemaPolicy) -> StoreResult<SqliteStore> {
        let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
        if let Some(dir) = std::path::Path::new(path.split('?').next().unwrap_or(path)).parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StoreError::Unavailable(format!("cannot create {dir:?}: {e}")))?;
            }
        }
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))
            .map_err(db_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(db_error)?;
        crate::shared::prepare_schema::<SqliteStore>(&write, policy).await?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await
            .map_err(db_error)?;
        // One lane: SQLite has one writer anyway; batches form while the previous one commits.
        let writer = write.clone();
        let steps = Batcher::spawn(1, MAX_STEP_BATCH, move |batch| {
            commit::record_steps(writer.clone(), batch)
        });
        let writer = write.clone();
        let starts = Batcher::spawn(1, crate::shared::starts::MAX_GROUP, move |group| {
            crate::shared::starts::start_group::<SqliteStore>(writer.clone(), group)
        });
        Ok(SqliteStore {
            write,
            read,
            steps,
            starts,
            silent: Default::default(),
        })
    }
}

/// What the shared SQL needs of this store (the rest is in `dialect.rs`, `commit.rs`, `flow.rs`
/// and `remote_steps.rs`).
impl crate::dialect::Backend for SqliteStore {
    fn reader(&self) -> &SqlitePool {
        &self.read
    }

    fn writer(&self) -> &SqlitePool {
        &self.write
    }

    /// One process owns the file: there are no other replicas to tell.
    fn announce_soon(&self, _change: Change) {}

    async fn announce(&self, _conn: &mut Conn<Self>, _change: Change) -> StoreResult<()> {
        Ok(())
    }

    async fn changes(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<Change>>> {
        // One process owns the file: every change happens through this replica, so there is
        // nothing to announce, and nothing to poll for. The channel stays open and silent.
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        self.silent.lock().unwrap().push(tx);
        Ok(Some(rx))
    }
}
