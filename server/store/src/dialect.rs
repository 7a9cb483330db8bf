//! What a SQL backend must say and do for the shared SQL in `shared/` to run on it, written as
//! traits so that the compiler, not a naming convention, tells a backend what it owes.
//!
//! - [`Dialect`]: the words (row locks, lists bound as one parameter, …) and how its driver
//!   runs a statement. Stateless.
//! - [`Backend`]: what one store of that dialect holds and does its own way (its pools, how it
//!   tells other replicas of a change, the statements it writes differently).
//!
//! The shared SQL is generic over them: `impl<B: Backend> Events for B`. It builds statements
//! with [`Dialect::query`], [`Dialect::query_as`] and [`Dialect::query_scalar`], which take the
//! same binds as sqlx's and run on a pool or on a connection inside a transaction ([`Exec`]).
//! The values they bind and decode are those both drivers know ([`Arg`], [`Row`],
//! [`Scalar`]): naming the two drivers there is what lets generic code bind a `&str` without
//! a `where` clause per function.

use std::future::Future;
use std::marker::PhantomData;

use sqlx::error::BoxDynError;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, Encode, Postgres, Sqlite, Type};
use tokio::sync::mpsc::Receiver;

use crate::changes::Change;
use crate::rows::WorkflowRow;
use crate::*;

/// A value both drivers bind.
pub(crate) trait Arg<'q>:
    Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres> + Send + 'q
{
}
impl<'q, T> Arg<'q> for T where T: Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres> + Send + 'q {}

/// A row both drivers decode (a `#[derive(sqlx::FromRow)]` struct, or a tuple of [`Scalar`]s).
pub(crate) trait Row:
    for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin
{
}
impl<T> Row for T where T: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin {}

/// A single column's value both drivers decode.
pub(crate) trait Scalar:
    for<'r> sqlx::Decode<'r, Sqlite> + Type<Sqlite> + for<'r> sqlx::Decode<'r, Postgres> + Type<Postgres> + Send + Unpin
{
}
impl<T> Scalar for T where
    T: for<'r> sqlx::Decode<'r, Sqlite>
        + Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + Type<Postgres>
        + Send
        + Unpin
{
}

/// Where a statement runs: on a pool (a connection of its own, autocommit) or on a connection
/// the caller holds, usually inside a transaction.
pub(crate) enum On<'e, D: Dialect> {
    Pool(&'e sqlx::Pool<D::Db>),
    Conn(&'e mut <D::Db as Database>::Connection),
}

/// What a statement can run on: `self.reader()`, `self.writer()`, or `&mut *tx`.
pub(crate) trait Exec<'e, D: Dialect>: Send {
    fn on(self) -> On<'e, D>;
}

impl<'e, D: Dialect> Exec<'e, D> for &'e sqlx::Pool<D::Db> {
    fn on(self) -> On<'e, D> {
        On::Pool(self)
    }
}

impl<'e, D: Dialect> Exec<'e, D> for &'e mut <D::Db as Database>::Connection {
    fn on(self) -> On<'e, D> {
        On::Conn(self)
    }
}

/// What running a statement that returns no rows tells.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows: u64,
}

impl Done {
    pub fn new(rows: u64) -> Done {
        Done { rows }
    }

    /// How many rows the statement inserted, updated or deleted.
    pub fn rows_affected(&self) -> u64 {
        self.rows
    }
}

/// A statement's text and its bound values, ready for the driver.
pub(crate) struct Statement<D: Dialect> {
    pub text: sqlx::SqlStr,
    pub args: <D::Db as Database>::Arguments,
}

/// A statement being built: `K` says what running it gives back ([`Nothing`], [`Rows`] or
/// [`Column`]). A value that fails to encode is reported when the statement runs, as sqlx does.
pub(crate) struct Query<D: Dialect, K> {
    statement: Statement<D>,
    fault: Option<BoxDynError>,
    kind: PhantomData<fn() -> K>,
}

/// A statement run for its effect.
pub(crate) struct Nothing;
/// A statement whose rows decode as `O`.
pub(crate) struct Rows<O>(PhantomData<O>);
/// A statement whose rows' first column decodes as `O`.
pub(crate) struct Column<O>(PhantomData<O>);

impl<D: Dialect, K> Query<D, K> {
    fn new(text: impl sqlx::SqlSafeStr) -> Self {
        Query {
            statement: Statement {
                text: text.into_sql_str(),
                args: Default::default(),
            },
            fault: None,
            kind: PhantomData,
        }
    }

    /// Binds the next placeholder.
    pub fn bind<'q, T: Arg<'q>>(mut self, value: T) -> Self {
        if self.fault.is_none() {
            self.fault = D::add(&mut self.statement.args, value).err();
        }
        self
    }

    /// Binds a list of strings as one parameter, read in the statement with
    /// [`Dialect::in_list`], [`Dialect::pairs`] or [`Dialect::list_rows`].
    pub fn bind_list<T: AsRef<str>>(self, items: &[T]) -> Self {
        self.bind_list_or_null(Some(items))
    }

    /// Binds a list as [`Query::bind_list`] does, or NULL.
    pub fn bind_list_or_null<T: AsRef<str>>(mut self, items: Option<&[T]>) -> Self {
        if self.fault.is_none() {
            self.fault = D::add_list(&mut self.statement.args, items).err();
        }
        self
    }

    fn ready(self) -> Result<Statement<D>, sqlx::Error> {
        match self.fault {
            None => Ok(self.statement),
            Some(e) => Err(sqlx::Error::Encode(e)),
        }
    }
}

impl<D: Dialect> Query<D, Nothing> {
    pub async fn execute<'e>(self, on: impl Exec<'e, D>) -> Result<Done, sqlx::Error> {
        D::execute(on.on(), self.ready()?).await
    }
}

impl<D: Dialect, O: Row> Query<D, Rows<O>> {
    pub async fn fetch_all<'e>(self, on: impl Exec<'e, D>) -> Result<Vec<O>, sqlx::Error> {
        D::fetch_all(on.on(), self.ready()?).await
    }

    pub async fn fetch_optional<'e>(self, on: impl Exec<'e, D>) -> Result<Option<O>, sqlx::Error> {
        D::fetch_optional(on.on(), self.ready()?).await
    }

    pub async fn fetch_one<'e>(self, on: impl Exec<'e, D>) -> Result<O, sqlx::Error> {
        D::fetch_optional(on.on(), self.ready()?)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }
}

impl<D: Dialect, O: Scalar> Query<D, Column<O>> {
    pub async fn fetch_all<'e>(self, on: impl Exec<'e, D>) -> Result<Vec<O>, sqlx::Error> {
        let rows: Vec<(O,)> = D::fetch_all(on.on(), self.ready()?).await?;
        Ok(rows.into_iter().map(|(v,)| v).collect())
    }

    pub async fn fetch_optional<'e>(self, on: impl Exec<'e, D>) -> Result<Option<O>, sqlx::Error> {
        let row: Option<(O,)> = D::fetch_optional(on.on(), self.ready()?).await?;
        Ok(row.map(|(v,)| v))
    }

    pub async fn fetch_one<'e>(self, on: impl Exec<'e, D>) -> Result<O, sqlx::Error> {
        self.fetch_optional(on).await?.ok_or(sqlx::Error::RowNotFound)
    }
}

/// The words a backend's SQL says its own way, and how its driver runs a statement.
pub(crate) trait Dialect: Sized + Send + Sync + 'static {
    /// The driver.
    type Db: Database;
    /// Which backend, for logs.
    const NAME: &'static str;
    /// This build's migrations for the dialect. A database may have more, applied by a newer
    /// build; they only added, so this build runs beside them (see [`crate::schema`]).
    const MIGRATOR: &'static sqlx::migrate::Migrator;
    /// 0 or 1: which of a statement's two renderings is this dialect's (see [`sql!`]).
    const INDEX: usize;

    /// Locks the rows read for the transaction's writes.
    const FOR_UPDATE: &'static str;
    /// Locks the rows read against writers, not against other readers: a fence that lets
    /// concurrent writes of one workflow's steps through and holds off an epoch bump.
    const FOR_SHARE: &'static str;
    /// Locks the rows read for writes that change no key: two such transactions on one row
    /// take turns (a stream append computing `MAX + 1`), and so do they with `FOR SHARE` fences;
    /// `FOR KEY SHARE` reads still pass.
    const FOR_NO_KEY_UPDATE: &'static str;
    /// Locks the rows read against their deletion (and key changes) only.
    const FOR_KEY_SHARE: &'static str;
    /// Locks the rows read, skipping those another transaction holds, so concurrent claimers
    /// split the work instead of queueing behind each other.
    const SKIP_LOCKED: &'static str;
    /// A schedule that is not paused, in the very words of the partial index `schedules_due`.
    const UNPAUSED: &'static str;
    /// The function giving the smaller of two values.
    const LEAST: &'static str;
    /// Whether a `WITH` clause may hold an `INSERT ... RETURNING` whose rows the statement
    /// after it reads: two writes in one statement, one round trip, committed together.
    const WRITES_IN_WITH: bool;

    /// A test of a workflow's status where the row is found by its id; `alias` is `""` or a
    /// table alias with its dot (`"w."`).
    fn status_is(alias: &str, status: &str) -> String;
    /// `IN` the list bound (with [`Query::bind_list`]) at placeholder `p`.
    fn in_list(p: &str) -> String;
    /// Two lists bound at placeholders `a` and `b`, zipped into a table `k(first, second)`.
    fn pairs(a: &str, b: &str) -> String;
    /// The list bound at placeholder `p` as a table `l(value)`.
    fn list_rows(p: &str) -> String;
    /// `IN` the rows of the subquery made of `parts`, each locked and skipped when another transaction
    /// holds it. Callers re-check what they selected on the locked row.
    fn in_locked(parts: &[&str]) -> String;
    /// Not among the rows of the subquery made of `parts`, which runs once.
    fn not_in_once(parts: &[&str]) -> String;
    /// Locks the rows read of table `table` only, skipping those another transaction holds.
    fn skip_locked_of(table: &str) -> String;

    /// Adds `value` to `args`.
    fn add<'q, T: Arg<'q>>(args: &mut <Self::Db as Database>::Arguments, value: T) -> Result<(), BoxDynError>;
    /// Adds `items` to `args` as one list parameter (NULL for `None`).
    fn add_list<T: AsRef<str>>(
        args: &mut <Self::Db as Database>::Arguments,
        items: Option<&[T]>,
    ) -> Result<(), BoxDynError>;

    /// Applies [`Dialect::MIGRATOR`]'s migrations the database lacks.
    fn migrate(pool: &sqlx::Pool<Self::Db>) -> impl Future<Output = Result<(), sqlx::migrate::MigrateError>> + Send;

    fn execute<'e>(
        on: On<'e, Self>,
        statement: Statement<Self>,
    ) -> impl Future<Output = Result<Done, sqlx::Error>> + Send;
    fn fetch_all<'e, O: Row>(
        on: On<'e, Self>,
        statement: Statement<Self>,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send;
    fn fetch_optional<'e, O: Row>(
        on: On<'e, Self>,
        statement: Statement<Self>,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send;

    /// A statement run for its effect.
    fn query(text: impl sqlx::SqlSafeStr) -> Query<Self, Nothing> {
        Query::new(text)
    }

    /// A statement whose rows decode as `O`.
    fn query_as<O: Row>(text: impl sqlx::SqlSafeStr) -> Query<Self, Rows<O>> {
        Query::new(text)
    }

    /// A statement whose rows' first column decodes as `O`.
    fn query_scalar<O: Scalar>(text: impl sqlx::SqlSafeStr) -> Query<Self, Column<O>> {
        Query::new(text)
    }
}

/// A statement's text put together from literals and a dialect's words, once per dialect and
/// process: `sql!(D: "SELECT … FROM workflows WHERE id = $1", D::FOR_UPDATE)`. The parts are
/// anything that reads as `&str`; the text is kept for the life of the process (one per call
/// site and dialect), so statements stay `&'static str` and the driver's statement cache
/// sees the same text each time.
macro_rules! sql {
    ($d:ty: $($part:expr),+ $(,)?) => {{
        static TEXT: [::std::sync::OnceLock<&'static str>; 2] =
            [::std::sync::OnceLock::new(), ::std::sync::OnceLock::new()];
        *TEXT[<$d as $crate::dialect::Dialect>::INDEX].get_or_init(|| {
            let text: String = [$(::std::convert::AsRef::<str>::as_ref(&$part)),+].concat();
            &*Box::leak(text.into_boxed_str())
        })
    }};
}
pub(crate) use sql;

/// Implements the running half of [`Dialect`] for driver `$db`, whose pool and connection
/// are concrete here, so sqlx's own bounds hold.
macro_rules! runs_on {
    ($db:ty) => {
        fn add<'q, T: $crate::dialect::Arg<'q>>(
            args: &mut <$db as sqlx::Database>::Arguments,
            value: T,
        ) -> Result<(), sqlx::error::BoxDynError> {
            sqlx::Arguments::add(args, value)
        }

        async fn migrate(pool: &sqlx::Pool<$db>) -> Result<(), sqlx::migrate::MigrateError> {
            Self::MIGRATOR.run(pool).await
        }

        async fn execute<'e>(
            on: $crate::dialect::On<'e, Self>,
            statement: $crate::dialect::Statement<Self>,
        ) -> Result<$crate::dialect::Done, sqlx::Error> {
            let query = sqlx::query_with::<$db, _>(statement.text, statement.args);
            let done = match on {
                $crate::dialect::On::Pool(pool) => query.execute(pool).await?,
                $crate::dialect::On::Conn(conn) => query.execute(conn).await?,
            };
            Ok($crate::dialect::Done::new(done.rows_affected()))
        }

        async fn fetch_all<'e, O: $crate::dialect::Row>(
            on: $crate::dialect::On<'e, Self>,
            statement: $crate::dialect::Statement<Self>,
        ) -> Result<Vec<O>, sqlx::Error> {
            let query = sqlx::query_as_with::<$db, O, _>(statement.text, statement.args);
            match on {
                $crate::dialect::On::Pool(pool) => query.fetch_all(pool).await,
                $crate::dialect::On::Conn(conn) => query.fetch_all(conn).await,
            }
        }

        async fn fetch_optional<'e, O: $crate::dialect::Row>(
            on: $crate::dialect::On<'e, Self>,
            statement: $crate::dialect::Statement<Self>,
        ) -> Result<Option<O>, sqlx::Error> {
            let query = sqlx::query_as_with::<$db, O, _>(statement.text, statement.args);
            match on {
                $crate::dialect::On::Pool(pool) => query.fetch_optional(pool).await,
                $crate::dialect::On::Conn(conn) => query.fetch_optional(conn).await,
            }
        }
    };
}
pub(crate) use runs_on;

/// A connection of dialect `B`'s driver.
pub(crate) type Conn<B> = <<B as Dialect>::Db as Database>::Connection;

/// What one store of a SQL dialect holds, and what it does its own way: the traits below,
/// each implemented in the backend's file of that name, because each backend has its own
/// fastest shape for them; the operation they carry out is the same.
pub(crate) trait Backend: Dialect + Locks + GroupCommit + Starts + StepClaims + crate::Store {
    /// Where reads go (on SQLite, a pool that never waits for the writer).
    fn reader(&self) -> &sqlx::Pool<Self::Db>;
    /// Where writes go (on SQLite, the one writer connection).
    fn writer(&self) -> &sqlx::Pool<Self::Db>;

    /// Tells the other replicas of a change that has committed (batched, best effort).
    fn announce_soon(&self, change: Change);
    /// Tells the other replicas of a change when the transaction on `conn` commits.
    fn announce(&self, conn: &mut Conn<Self>, change: Change) -> impl Future<Output = StoreResult<()>> + Send;
    /// Changes other replicas commit, as they commit; see [`crate::Store::subscribe`].
    fn changes(&self) -> impl Future<Output = StoreResult<Option<Receiver<Change>>>> + Send;
}

/// How transactions take turns on a key: advisory locks on PostgreSQL; nothing on SQLite, whose
/// one writer connection runs them one at a time (`dialect.rs` of each backend).
pub(crate) trait Locks: Dialect {
    /// Serializes the transactions that hand out worker id `worker_id`.
    fn lock_worker_id(conn: &mut Conn<Self>, worker_id: &str) -> impl Future<Output = StoreResult<()>> + Send;
    /// Whether this transaction may run the retention collector's batch now.
    fn try_lock_collector(conn: &mut Conn<Self>) -> impl Future<Output = StoreResult<bool>> + Send;
    /// Makes parking and the writes that resolve a wait take turns on the wait's key, so a park
    /// never misses a resolution committed between its check and its update (a lost wakeup).
    fn lock_wait_key(
        conn: &mut Conn<Self>,
        workflow_id: Option<&str>,
        on: &ParkedOn,
    ) -> impl Future<Output = StoreResult<()>> + Send;
}

/// Step checkpoints and completions, group-committed: concurrent ones share a transaction
/// (`commit.rs` of each backend).
pub(crate) trait GroupCommit {
    /// Records a step checkpoint.
    fn record(&self, fence: &Fence, step: NewStep, now: Millis) -> impl Future<Output = StoreResult<Recorded>> + Send;
    /// Finishes a workflow with no steps to record; the row as finished, `None` when refused.
    fn finish_fenced(
        &self,
        fence: &Fence,
        outcome: Outcome,
        now: Millis,
    ) -> impl Future<Output = StoreResult<Option<WorkflowRow>>> + Send;
    /// Records the last steps and the outcome together; `None`, writing nothing, when any of
    /// it is refused (the caller then goes one by one to explain why).
    fn complete_in_one(
        &self,
        fence: &Fence,
        steps: &[NewStep],
        outcome: &Outcome,
        now: Millis,
    ) -> impl Future<Output = StoreResult<Option<Completed>>> + Send;
}

/// Starts, and the reading of a limited queue's partition heads (`flow.rs` of each backend).
pub(crate) trait Starts: Dialect {
    /// Starts a workflow (see [`crate::Workflows::start_workflow`]), group-committed with the
    /// starts that arrive with it (SQLite: [`crate::shared::starts::start_group`]; PostgreSQL:
    /// one multi-row statement, `postgres/starts.rs`).
    fn start(&self, new: NewWorkflow, now: Millis) -> impl Future<Output = StoreResult<Started>> + Send;
    /// Starts one workflow in a transaction of its own: a start that came alone, or one of a
    /// group whose shared transaction failed.
    fn start_alone(
        pool: &sqlx::Pool<Self::Db>,
        new: &NewWorkflow,
        now: Millis,
    ) -> impl Future<Output = StoreResult<Started>> + Send;
    /// Inserts a workflow as a start does, inside the caller's transaction, or finds the one
    /// already under its id or its dedup id. Schedules start this way.
    fn insert_workflow(
        conn: &mut Conn<Self>,
        new: &NewWorkflow,
        now: Millis,
    ) -> impl Future<Output = StoreResult<Started>> + Send;
    /// The first enqueued workflows of each of partition keys `keys` of queue `queue` that
    /// `claim` may take, at most `rooms[i]` of `keys[i]`: `(workflow_id, key, started before)`.
    fn partition_heads(
        conn: &mut Conn<Self>,
        queue: &str,
        claim: &Claim,
        keys: &[String],
        rooms: &[i64],
    ) -> impl Future<Output = StoreResult<Vec<(String, String, bool)>>> + Send;
}

/// Claiming attempts of remote steps (`remote_steps.rs` of each backend).
pub(crate) trait StepClaims {
    fn claim_attempts(&self, claim: &StepClaim, now: Millis)
        -> impl Future<Output = StoreResult<Vec<StepTask>>> + Send;
}
