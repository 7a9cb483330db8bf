//! What the shared SQL in `shared/` says differently on PostgreSQL: the row locks that keep
//! replicas writing the same rows from interleaving.

/// A list of strings bound as one parameter: a `text[]`.
pub(super) type List = Vec<String>;

pub(super) fn list<T: AsRef<str>>(items: &[T]) -> List {
    items.iter().map(|s| s.as_ref().to_string()).collect()
}

impl crate::dialect::Dialect for super::PostgresStore {
    type Db = sqlx::Postgres;
    const NAME: &'static str = "postgres";
    const MIGRATOR: &'static sqlx::migrate::Migrator = &super::MIGRATOR;
    const INDEX: usize = 1;

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_SHARE: &'static str = " FOR SHARE";
    const FOR_NO_KEY_UPDATE: &'static str = " FOR NO KEY UPDATE";
    const FOR_KEY_SHARE: &'static str = " FOR KEY SHARE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const UNPAUSED: &'static str = "NOT paused";
    const LEAST: &'static str = "LEAST";
    const WRITES_IN_WITH: bool = true;

    /// Written so that the planner cannot prove a partial index's predicate from it. From a
    /// plain `status = 'PENDING'` it can, and it then weighs reading the one row through a
    /// partial index on that status (scanning all of it) against the primary key. It takes the
    /// partial index whenever its statistics say that index is empty — as they do after a
    /// vacuum taken while nothing ran, on a table whose finished rows make the key look dear —
    /// and each lookup then reads every running workflow. The bench's `--collecting` workload
    /// found this: beside a million finished workflows, PostgreSQL's throughput fell by a third.
    fn status_is(alias: &str, status: &str) -> String {
        format!("({alias}status = '{status}') IS TRUE")
    }

    /// Lists are `text[]`.
    fn in_list(p: &str) -> String {
        format!(" = ANY({p})")
    }

    fn pairs(a: &str, b: &str) -> String {
        format!("unnest({a}::text[], {b}::text[]) AS k(first, second)")
    }

    fn list_rows(p: &str) -> String {
        format!("unnest({p}::text[]) AS l(value)")
    }

    /// `= ANY(ARRAY(subquery))` rather than `IN (subquery)`: the ARRAY form is an InitPlan, run
    /// exactly once. With `IN`, the planner may pick a nested-loop semi-join that re-scans the
    /// locking subquery per outer row, and with SKIP LOCKED each re-scan can see a different
    /// set, taking more rows than the subquery's LIMIT.
    fn in_locked(parts: &[&str]) -> String {
        let sub = parts.concat();
        format!(" = ANY(ARRAY({sub} FOR UPDATE SKIP LOCKED))")
    }

    /// `<> ALL(ARRAY(…))`, an InitPlan.
    fn not_in_once(parts: &[&str]) -> String {
        let sub = parts.concat();
        format!(" <> ALL(ARRAY({sub}))")
    }

    fn skip_locked_of(table: &str) -> String {
        format!(" FOR UPDATE OF {table} SKIP LOCKED")
    }

    fn add_list<T: AsRef<str>>(
        args: &mut sqlx::postgres::PgArguments,
        items: Option<&[T]>,
    ) -> Result<(), sqlx::error::BoxDynError> {
        sqlx::Arguments::add(args, items.map(list))
    }

    crate::dialect::runs_on!(sqlx::Postgres);
}

impl crate::dialect::Locks for super::PostgresStore {
    /// Parking and the writes that resolve a wait take turns on the wait's key, so a park never
    /// misses a resolution committed between its check and its update (a lost wakeup).
    /// The key names the waiting workflow too when the resolving write knows it (a message, a
    /// remote step's result), so unrelated workflows do not queue on one lock.
    /// Serializes the transactions that hand out worker id `worker_id` (see `hold_worker_id`).
    async fn lock_worker_id(conn: &mut sqlx::PgConnection, worker_id: &str) -> crate::StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("worker\n{worker_id}"))
            .execute(&mut *conn)
            .await
            .map_err(crate::rows::db_error)?;
        Ok(())
    }

    /// Whether this transaction may run the retention collector's batch: one replica at a time
    /// per schema (namespace), the others skip their turn instead of waiting.
    async fn try_lock_collector(conn: &mut sqlx::PgConnection) -> crate::StoreResult<bool> {
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtextextended('collector ' || current_schema(), 0))")
            .fetch_one(&mut *conn)
            .await
            .map_err(crate::rows::db_error)
    }

    async fn lock_wait_key(
        conn: &mut sqlx::PgConnection,
        workflow_id: Option<&str>,
        on: &crate::ParkedOn,
    ) -> crate::StoreResult<()> {
        let key = match workflow_id {
            Some(w) => format!("{w}\n{}", on.key()),
            None => on.key(),
        };
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(key)
            .execute(&mut *conn)
            .await
            .map_err(crate::rows::db_error)?;
        Ok(())
    }
}
