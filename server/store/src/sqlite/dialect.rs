//! What the shared SQL in `shared/` says differently on SQLite. Row locks are no-ops here: every
//! write runs on the one writer connection, so a transaction is never interleaved with another.

/// A list of strings bound as one parameter: JSON array text, read with `json_each`.
pub(super) type List = String;

pub(super) fn list<T: AsRef<str>>(items: &[T]) -> List {
    serde_json::to_string(&items.iter().map(|s| s.as_ref()).collect::<Vec<_>>()).expect("strings serialize")
}

impl crate::dialect::Dialect for super::SqliteStore {
    type Db = sqlx::Sqlite;
    const NAME: &'static str = "sqlite";
    const MIGRATOR: &'static sqlx::migrate::Migrator = &super::MIGRATOR;
    const INDEX: usize = 0;

    // Row locks are no-ops: every write runs on the one writer connection.
    const FOR_UPDATE: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const FOR_NO_KEY_UPDATE: &'static str = "";
    const FOR_KEY_SHARE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const UNPAUSED: &'static str = "paused = 0";
    const LEAST: &'static str = "MIN";
    const WRITES_IN_WITH: bool = false;

    /// SQLite plans an equality on the unique key as a one-row lookup: the test stays plain.
    fn status_is(alias: &str, status: &str) -> String {
        format!("{alias}status = '{status}'")
    }

    /// Lists are JSON array text, read with `json_each`.
    fn in_list(p: &str) -> String {
        format!(" IN (SELECT value FROM json_each({p}))")
    }

    fn pairs(a: &str, b: &str) -> String {
        format!("(SELECT f.value AS first, s.value AS second FROM json_each({a}) f JOIN json_each({b}) s ON f.key = s.key) AS k")
    }

    fn list_rows(p: &str) -> String {
        format!("json_each({p}) AS l")
    }

    /// The single writer holds no row locks: a plain `IN`.
    fn in_locked(parts: &[&str]) -> String {
        let sub = parts.concat();
        format!(" IN ({sub})")
    }

    fn not_in_once(parts: &[&str]) -> String {
        let sub = parts.concat();
        format!(" NOT IN ({sub})")
    }

    fn skip_locked_of(_table: &str) -> String {
        String::new()
    }

    fn add_list<T: AsRef<str>>(
        args: &mut sqlx::sqlite::SqliteArguments,
        items: Option<&[T]>,
    ) -> Result<(), sqlx::error::BoxDynError> {
        sqlx::Arguments::add(args, items.map(list))
    }

    crate::dialect::runs_on!(sqlx::Sqlite);
}

impl crate::dialect::Locks for super::SqliteStore {
    /// Parking and the writes that resolve a wait take turns on the wait's key on PostgreSQL; the
    /// single writer connection already runs them one at a time.
    /// Serializes the transactions that hand out worker id `worker_id` (see `hold_worker_id`).
    async fn lock_worker_id(conn: &mut sqlx::SqliteConnection, worker_id: &str) -> crate::StoreResult<()> {
        // One writer: the transaction alone is the lock.
        let _ = (conn, worker_id);
        Ok(())
    }

    /// Whether this transaction may run the retention collector's batch: always, as the single
    /// writer connection runs batches one at a time.
    async fn try_lock_collector(conn: &mut sqlx::SqliteConnection) -> crate::StoreResult<bool> {
        let _ = conn;
        Ok(true)
    }

    async fn lock_wait_key(
        _conn: &mut sqlx::SqliteConnection,
        _workflow_id: Option<&str>,
        _on: &crate::ParkedOn,
    ) -> crate::StoreResult<()> {
        Ok(())
    }
}
