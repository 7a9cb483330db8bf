//! What the shared SQL in `sql/` says differently on SQLite. Row locks are no-ops here: every
//! write runs on the one writer connection, so a transaction is never interleaved with another.

/// Locks the rows read for the transaction's writes (PostgreSQL's `FOR UPDATE`).
macro_rules! for_update {
    () => {
        ""
    };
}

/// Locks the rows read against writers, not against other readers (`FOR SHARE`).
macro_rules! for_share {
    () => {
        ""
    };
}

/// Locks the rows read for writes that change no key (`FOR NO KEY UPDATE`): two such
/// transactions on one row take turns.
macro_rules! for_no_key_update {
    () => {
        ""
    };
}

/// A status test on a workflow found by its id (see PostgreSQL's `status_is!`). SQLite plans an
/// equality on the unique key as a one-row lookup, so the test stays plain here.
macro_rules! status_is {
    ($status:literal) => {
        concat!("status = '", $status, "'")
    };
    ($alias:literal, $status:literal) => {
        concat!($alias, "status = '", $status, "'")
    };
}

/// Locks the rows read, skipping those another transaction holds (`FOR UPDATE SKIP LOCKED`).
macro_rules! skip_locked {
    () => {
        ""
    };
}

/// A schedule that is not paused, in the very words of the partial index `schedules_due`, which
/// SQLite uses only when the query repeats its condition.
macro_rules! unpaused {
    () => {
        "paused = 0"
    };
}

/// A list of strings bound as one parameter: JSON array text, read with `json_each`.
pub(super) type List = String;

pub(super) fn list<T: AsRef<str>>(items: &[T]) -> List {
    serde_json::to_string(&items.iter().map(|s| s.as_ref()).collect::<Vec<_>>()).expect("strings serialize")
}

/// `IN` the list bound at the placeholder.
macro_rules! in_list {
    ($p:literal) => {
        concat!(" IN (SELECT value FROM json_each(", $p, "))")
    };
}

/// Two lists bound at the placeholders, zipped into a table `k(first, second)`.
macro_rules! pairs {
    ($a:literal, $b:literal) => {
        concat!(
            "(SELECT f.value AS first, s.value AS second FROM json_each(",
            $a,
            ") f JOIN json_each(",
            $b,
            ") s ON f.key = s.key) AS k"
        )
    };
}

/// `IN` the rows of the subquery, each locked and skipped when another transaction holds it.
/// (The single writer holds no row locks: a plain `IN`.)
macro_rules! in_locked {
    ($($sub:tt)*) => {
        concat!(" IN (", $($sub)*, ")")
    };
}

/// Parking and the writes that resolve a wait take turns on the wait's key on PostgreSQL; the
/// single writer connection already runs them one at a time.
/// Serializes the transactions that hand out worker id `worker_id` (see `hold_worker_id`).
pub(super) async fn lock_worker_id(conn: &mut sqlx::SqliteConnection, worker_id: &str) -> crate::StoreResult<()> {
    // One writer: the transaction alone is the lock.
    let _ = (conn, worker_id);
    Ok(())
}

/// Whether this transaction may run the retention collector's batch: always, as the single
/// writer connection runs batches one at a time.
pub(super) async fn try_lock_collector(conn: &mut sqlx::SqliteConnection) -> crate::StoreResult<bool> {
    let _ = conn;
    Ok(true)
}

pub(super) async fn lock_wait_key(
    _conn: &mut sqlx::SqliteConnection,
    _workflow_id: Option<&str>,
    _on: &crate::ParkedOn,
) -> crate::StoreResult<()> {
    Ok(())
}

/// The list bound at the placeholder as a table `l(value)`.
macro_rules! list_rows {
    ($p:literal) => {
        concat!("json_each(", $p, ") AS l")
    };
}

/// Locks the rows read of the named table only, skipping those another transaction holds.
macro_rules! skip_locked_of {
    ($t:literal) => {
        ""
    };
}

impl super::SqliteStore {
    /// Tells the other replicas of a change inside a transaction: there are none.
    pub(crate) async fn announce<'e, E: sqlx::Executor<'e, Database = sqlx::Sqlite>>(
        &self,
        _exec: E,
        _change: crate::changes::Change,
    ) -> crate::StoreResult<()> {
        Ok(())
    }
}

/// Locks the rows read against their deletion only (`FOR KEY SHARE`).
macro_rules! for_key_share {
    () => {
        ""
    };
}

/// Not among the rows of the subquery, which runs once.
macro_rules! not_in_once {
    ($($sub:tt)*) => {
        concat!(" NOT IN (", $($sub)*, ")")
    };
}

/// The smaller of two values.
macro_rules! least {
    () => {
        "MIN"
    };
}
