//! Group commit for starts on PostgreSQL: the starts that arrive together go in as one
//! multi-row INSERT, so a group costs one round trip and one commit, not one each. A group
//! written statement by statement in one transaction was tried first and measured no faster
//! than single-statement starts (each statement waits for the one before it); one statement
//! is what pays.
//!
//! The rows are those a single start inserts (`shared/starts.rs`: direct dispatch only on a
//! queue without limits and without a delay), in workflow id order, so two groups holding the
//! same ids wait for each other in one order. A start whose row did not go in — its id or its
//! dedup id taken, before or earlier in the group — is then made alone, which finds what
//! stopped it and answers as a lone start would. A database error (a value PostgreSQL refuses)
//! fails the statement: every start of the group is then made alone, so one bad start fails
//! alone.

use sqlx::PgPool;

use super::PostgresStore;
use crate::dialect::Starts;
use crate::queues::has_limits;
use crate::rows::{self, workflow_columns, WorkflowRow};
use crate::*;

/// Groups written at once.
pub(super) const LANES: usize = 4;

const INSERT_GROUP: &str = concat!(
    "WITH v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], \
       $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[], \
       $15::text[], $16::text[], $17::text[], $18::text[]) WITH ORDINALITY \
       AS v(v_id, v_name, v_queue, v_version, v_input, v_now, v_worker, v_session, v_worker_version, v_parent, \
         v_deadline, v_priority, v_run_at, v_partition, v_dedup, v_traceparent, v_tracestate, v_tags, v_ord)), \
     a AS (SELECT v.*, CASE WHEN v_worker IS NOT NULL AND v_run_at IS NULL AND NOT EXISTS \
       (SELECT 1 FROM queues WHERE queue_name = v_queue AND ",
    has_limits!(),
    ") THEN v_worker END AS v_assigned FROM v) \
     INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
       updated_at, epoch, worker_id, session_id, parent_workflow_id, deadline_at, priority, partition_key, \
       dedup_id, wake_at, started_at, traceparent, tracestate, tags) \
     SELECT v_id, v_name, CASE WHEN v_run_at IS NOT NULL THEN 'DELAYED' WHEN v_assigned IS NULL THEN 'ENQUEUED' \
       ELSE 'PENDING' END, v_queue, COALESCE(v_version, CASE WHEN v_assigned IS NOT NULL THEN v_worker_version END), \
       v_input, v_now, v_now, CASE WHEN v_assigned IS NULL THEN 0 ELSE 1 END, v_assigned, \
       CASE WHEN v_assigned IS NOT NULL THEN v_session END, v_parent, v_deadline, v_priority, v_partition, v_dedup, \
       v_run_at, CASE WHEN v_assigned IS NOT NULL THEN v_now END, v_traceparent, v_tracestate, v_tags \
     FROM a ORDER BY v_ord ON CONFLICT DO NOTHING RETURNING ",
    workflow_columns!()
);

/// The group's columns, one array each, in the order of `INSERT_GROUP`'s parameters.
#[derive(Default)]
struct Columns {
    id: Vec<String>,
    name: Vec<String>,
    queue: Vec<String>,
    version: Vec<Option<String>>,
    input: Vec<String>,
    now: Vec<i64>,
    worker: Vec<Option<String>>,
    session: Vec<Option<String>>,
    worker_version: Vec<Option<String>>,
    parent: Vec<Option<String>>,
    deadline: Vec<Option<i64>>,
    priority: Vec<i64>,
    run_at: Vec<Option<i64>>,
    partition: Vec<String>,
    dedup: Vec<Option<String>>,
    traceparent: Vec<Option<String>>,
    tracestate: Vec<Option<String>>,
    tags: Vec<Option<String>>,
}

impl Columns {
    fn push(&mut self, new: &NewWorkflow, now: Millis) {
        let a = new.assign.as_ref();
        let (traceparent, tracestate) = rows::trace_columns(new.trace.as_ref());
        self.id.push(new.workflow_id.clone());
        self.name.push(new.workflow_name.clone());
        self.queue.push(new.queue_name.clone());
        self.version.push(new.app_version.clone());
        self.input.push(new.input.clone());
        self.now.push(now);
        self.worker.push(a.map(|a| a.worker_id.clone()));
        self.session.push(a.map(|a| a.session_id.clone()));
        self.worker_version
            .push(a.map(|a| a.app_version.clone()).filter(|v| !v.is_empty()));
        self.parent.push(new.parent_workflow_id.clone());
        self.deadline.push(new.deadline_at);
        self.priority.push(new.priority as i64);
        self.run_at.push(new.run_at);
        self.partition.push(new.partition_key.clone());
        self.dedup.push(new.dedup_id.clone());
        self.traceparent.push(traceparent.map(str::to_string));
        self.tracestate.push(tracestate.map(str::to_string));
        self.tags.push(rows::tags_column(&new.tags));
    }
}

/// Writes a group of starts (none debounced): one answer per start, in the group's order.
pub(super) async fn write(pool: PgPool, group: Vec<(NewWorkflow, Millis)>) -> StoreResult<Vec<StoreResult<Started>>> {
    let mut answers: Vec<Option<StoreResult<Started>>> = group.iter().map(|_| None).collect();
    if group.len() > 1 {
        let mut order: Vec<usize> = (0..group.len()).collect();
        order.sort_by(|&a, &b| group[a].0.workflow_id.cmp(&group[b].0.workflow_id));
        let mut c = Columns::default();
        for &i in &order {
            c.push(&group[i].0, group[i].1);
        }
        let inserted: Result<Vec<WorkflowRow>, _> = sqlx::query_as(INSERT_GROUP)
            .bind(&c.id)
            .bind(&c.name)
            .bind(&c.queue)
            .bind(&c.version)
            .bind(&c.input)
            .bind(&c.now)
            .bind(&c.worker)
            .bind(&c.session)
            .bind(&c.worker_version)
            .bind(&c.parent)
            .bind(&c.deadline)
            .bind(&c.priority)
            .bind(&c.run_at)
            .bind(&c.partition)
            .bind(&c.dedup)
            .bind(&c.traceparent)
            .bind(&c.tracestate)
            .bind(&c.tags)
            .fetch_all(&pool)
            .await;
        // On an error nothing went in, and every start is made alone below.
        for row in inserted.unwrap_or_default() {
            // Of two starts of one id, the first in id order is the one inserted.
            let Some(&i) = order
                .iter()
                .find(|&&i| answers[i].is_none() && group[i].0.workflow_id == row.workflow_id)
            else {
                continue;
            };
            answers[i] = Some(row.try_into().map(|workflow| Started {
                workflow,
                created: true,
            }));
        }
    }
    let mut out = Vec::with_capacity(group.len());
    for ((new, now), answer) in group.iter().zip(answers) {
        out.push(match answer {
            Some(answer) => answer,
            None => PostgresStore::start_alone(&pool, new, *now).await,
        });
    }
    Ok(out)
}
