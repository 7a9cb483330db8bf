//! What the shared SQL in `sql/` says differently on PostgreSQL: the row locks that keep
//! replicas writing the same rows from interleaving.

/// Locks the rows read for the transaction's writes.
macro_rules! for_update {
    () => {
        " FOR UPDATE"
    };
}

/// Locks the rows read against writers, not against other readers: a fence that lets
/// concurrent writes of one workflow's steps through and holds off an epoch bump.
macro_rules! for_share {
    () => {
        " FOR SHARE"
    };
}

/// Locks the rows read for writes that change no key: two such transactions on one row take
/// turns (a stream append computing `MAX + 1`), while `FOR SHARE` fences still pass.
macro_rules! for_no_key_update {
    () => {
        " FOR NO KEY UPDATE"
    };
}

/// Locks the rows read, skipping those another transaction holds, so concurrent claimers split
/// the work instead of queueing behind each other.
macro_rules! skip_locked {
    () => {
        " FOR UPDATE SKIP LOCKED"
    };
}

/// A status test on a workflow found by its id: `status_is!("PENDING")`, or with a table
/// alias, `status_is!("w.", "PENDING")`.
///
/// Written so that the planner cannot prove a partial index's predicate from it. From a plain
/// `status = 'PENDING'` it can, and it then weighs reading the one row through a partial index
/// on that status (scanning all of it) against the primary key. It takes the partial index
/// whenever its statistics say that index is empty — as they do after a vacuum taken while
/// nothing ran, on a table whose finished rows make the key look dear — and each lookup then
/// reads every running workflow. The bench's `--collecting` workload found this: beside a
/// million finished workflows, PostgreSQL's throughput fell by a third.
macro_rules! status_is {
    ($status:literal) => {
        concat!("(status = '", $status, "') IS TRUE")
    };
    ($alias:literal, $status:literal) => {
        concat!("(", $alias, "status = '", $status, "') IS TRUE")
    };
}

/// A schedule that is not paused, in the words of the partial index `schedules_due`.
macro_rules! unpaused {
    () => {
        "NOT paused"
    };
}

/// A list of strings bound as one parameter: a `text[]`.
pub(super) type List = Vec<String>;

pub(super) fn list<T: AsRef<str>>(items: &[T]) -> List {
    items.iter().map(|s| s.as_ref().to_string()).collect()
}

/// `IN` the list bound at the placeholder.
macro_rules! in_list {
    ($p:literal) => {
        concat!(" = ANY(", $p, ")")
    };
}

/// Two lists bound at the placeholders, zipped into a table `k(first, second)`.
macro_rules! pairs {
    ($a:literal, $b:literal) => {
        concat!("unnest(", $a, "::text[], ", $b, "::text[]) AS k(first, second)")
    };
}

/// `IN` the rows of the subquery, each locked and skipped when another transaction holds it.
/// `= ANY(ARRAY(subquery))` rather than `IN (subquery)`: the ARRAY form is an InitPlan, run
/// exactly once. With `IN`, the planner may pick a nested-loop semi-join that re-scans the
/// locking subquery per outer row, and with SKIP LOCKED each re-scan can see a different set,
/// taking more rows than the subquery's LIMIT. Callers re-check the status on the locked row.
macro_rules! in_locked {
    ($($sub:tt)*) => {
        concat!(" = ANY(ARRAY(", $($sub)*, " FOR UPDATE SKIP LOCKED))")
    };
}

/// Parking and the writes that resolve a wait take turns on the wait's key, so a park never
/// misses a resolution committed between its check and its update (a lost wakeup).
/// The key names the waiting workflow too when the resolving write knows it (a message, a
/// remote step's result), so unrelated workflows do not queue on one lock.
/// Serializes the transactions that hand out worker id `worker_id` (see `hold_worker_id`).
pub(super) async fn lock_worker_id(conn: &mut sqlx::PgConnection, worker_id: &str) -> crate::StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("worker\n{worker_id}"))
        .execute(&mut *conn)
        .await
        .map_err(crate::rows::db_error)?;
    Ok(())
}

/// Whether this transaction may run the retention collector's batch: one replica at a time
/// per schema (namespace), the others skip their turn instead of waiting.
pub(super) async fn try_lock_collector(conn: &mut sqlx::PgConnection) -> crate::StoreResult<bool> {
    sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtextextended('collector ' || current_schema(), 0))")
        .fetch_one(&mut *conn)
        .await
        .map_err(crate::rows::db_error)
}

pub(super) async fn lock_wait_key(
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

/// The list bound at the placeholder as a table `l(value)`.
macro_rules! list_rows {
    ($p:literal) => {
        concat!("unnest(", $p, "::text[]) AS l(value)")
    };
}

/// Locks the rows read of the named table only, skipping those another transaction holds.
macro_rules! skip_locked_of {
    ($t:literal) => {
        concat!(" FOR UPDATE OF ", $t, " SKIP LOCKED")
    };
}

/// Locks the rows read against their deletion (and key changes) only, not against ordinary
/// updates.
macro_rules! for_key_share {
    () => {
        " FOR KEY SHARE"
    };
}

/// Not among the rows of the subquery, which runs once (`<> ALL(ARRAY(…))`, an InitPlan).
macro_rules! not_in_once {
    ($($sub:tt)*) => {
        concat!(" <> ALL(ARRAY(", $($sub)*, "))")
    };
}

/// The smaller of two values.
macro_rules! least {
    () => {
        "LEAST"
    };
}
