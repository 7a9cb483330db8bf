//! Row shapes shared by both SQL stores, and their conversion into the contract's types.
//! Both schemas use the same column names and only TEXT / 64-bit integer columns, so one
//! `FromRow` shape decodes either driver's rows.

use crate::{Failure, Millis, Outcome, StepRecord, StoreError, StoreResult, WorkflowRecord, WorkflowStatus};

/// Columns of `workflows`, in the order [`WorkflowRow`] reads them.
macro_rules! workflow_columns {
    () => {
        "workflow_id, workflow_name, status, queue_name, app_version, input, output, failure, \
         created_at, updated_at, recovery_attempts, epoch, worker_id, parent_workflow_id, deadline_at, priority, \
         partition_key, dedup_id, started_at, wake_at, parked_on, traceparent, tracestate, forked_from, forked_from_step, tags, run, continued_as"
    };
}
pub(crate) use workflow_columns;

/// Columns of `steps`, in the order [`StepRow`] reads them.
macro_rules! step_columns {
    () => {
        "workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at"
    };
}
pub(crate) use step_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct WorkflowRow {
    pub workflow_id: String,
    pub workflow_name: String,
    pub status: String,
    pub queue_name: String,
    pub app_version: Option<String>,
    pub input: String,
    pub output: Option<String>,
    pub failure: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub recovery_attempts: i64,
    pub epoch: i64,
    pub worker_id: Option<String>,
    pub parent_workflow_id: Option<String>,
    pub deadline_at: Option<i64>,
    pub priority: i64,
    pub partition_key: String,
    pub dedup_id: Option<String>,
    pub started_at: Option<i64>,
    pub wake_at: Option<i64>,
    pub parked_on: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    pub forked_from: Option<String>,
    pub forked_from_step: Option<i64>,
    pub tags: Option<String>,
    pub run: i64,
    pub continued_as: Option<String>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct StepRow {
    pub workflow_id: String,
    pub step_id: i64,
    pub name: String,
    pub output: Option<String>,
    pub failure: Option<String>,
    pub attempts: i64,
    pub epoch: i64,
    pub recorded_at: Millis,
    pub started_at: Option<Millis>,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Unavailable(format!("stored row is malformed: {what}"))
}

fn outcome(output: Option<String>, failure: Option<String>) -> StoreResult<Option<Outcome>> {
    match (output, failure) {
        (_, Some(f)) => Ok(Some(Outcome::Failure(
            serde_json::from_str::<Failure>(&f).map_err(|_| corrupt("failure"))?,
        ))),
        (Some(o), None) => Ok(Some(Outcome::Output(o))),
        (None, None) => Ok(None),
    }
}

/// A stored trace context: none without a `traceparent`.
pub(crate) fn trace(traceparent: Option<String>, tracestate: Option<String>) -> Option<crate::TraceContext> {
    traceparent.map(|traceparent| crate::TraceContext {
        traceparent,
        tracestate: tracestate.unwrap_or_default(),
    })
}

/// The (traceparent, tracestate) column pair of an optional trace context.
pub(crate) fn trace_columns(trace: Option<&crate::TraceContext>) -> (Option<&str>, Option<&str>) {
    match trace {
        Some(t) => (
            Some(t.traceparent.as_str()),
            Some(t.tracestate.as_str()).filter(|s| !s.is_empty()),
        ),
        None => (None, None),
    }
}

/// The `tags` column of a workflow's tags: NULL for none, so the insert trigger skips it.
pub(crate) fn tags_column(tags: &crate::Tags) -> Option<String> {
    (!tags.is_empty()).then(|| serde_json::to_string(tags).expect("tags serialize"))
}

/// Splits an outcome into the (output, failure) column pair.
pub(crate) fn outcome_columns(outcome: &Outcome) -> (Option<String>, Option<String>) {
    match outcome {
        Outcome::Output(o) => (Some(o.clone()), None),
        Outcome::Failure(f) => (None, Some(serde_json::to_string(f).expect("failure serializes"))),
    }
}

impl TryFrom<WorkflowRow> for WorkflowRecord {
    type Error = StoreError;
    fn try_from(r: WorkflowRow) -> StoreResult<Self> {
        Ok(WorkflowRecord {
            status: WorkflowStatus::parse(&r.status).ok_or_else(|| corrupt("status"))?,
            outcome: outcome(r.output, r.failure)?,
            workflow_id: r.workflow_id,
            workflow_name: r.workflow_name,
            queue_name: r.queue_name,
            app_version: r.app_version,
            input: r.input,
            created_at: r.created_at,
            updated_at: r.updated_at,
            recovery_attempts: r.recovery_attempts as u32,
            epoch: r.epoch as u64,
            worker_id: r.worker_id,
            parent_workflow_id: r.parent_workflow_id,
            deadline_at: r.deadline_at,
            priority: r.priority as i32,
            partition_key: r.partition_key,
            dedup_id: r.dedup_id,
            started_at: r.started_at,
            wake_at: r.wake_at,
            parked_on: r.parked_on.as_deref().and_then(crate::ParkedOn::from_key),
            trace: trace(r.traceparent, r.tracestate),
            forked_from: r.forked_from.map(|source| crate::Lineage {
                workflow_id: source,
                from_step: r.forked_from_step.unwrap_or(0).clamp(0, u32::MAX as i64) as u32,
            }),
            tags: match r.tags {
                Some(t) => serde_json::from_str(&t).map_err(|_| corrupt("tags"))?,
                None => crate::Tags::new(),
            },
            run: r.run.clamp(0, u32::MAX as i64) as u32,
            continued_as: r.continued_as,
        })
    }
}

impl TryFrom<StepRow> for StepRecord {
    type Error = StoreError;
    fn try_from(r: StepRow) -> StoreResult<Self> {
        Ok(StepRecord {
            step_id: r.step_id as u32,
            name: r.name,
            outcome: outcome(r.output, r.failure)?.ok_or_else(|| corrupt("step without outcome"))?,
            attempts: r.attempts as u32,
            epoch: r.epoch as u64,
            recorded_at: r.recorded_at,
            started_at: r.started_at,
        })
    }
}

pub(crate) fn workflows(rows: Vec<WorkflowRow>) -> StoreResult<Vec<WorkflowRecord>> {
    rows.into_iter().map(WorkflowRecord::try_from).collect()
}

pub(crate) fn steps(rows: Vec<StepRow>) -> StoreResult<Vec<StepRecord>> {
    rows.into_iter().map(StepRecord::try_from).collect()
}

/// Why a fenced write was refused, worked out from the workflow's current state.
pub(crate) fn refusal(workflow_id: &str, current: Option<WorkflowRecord>, presented: u64) -> StoreError {
    match current {
        None => StoreError::WorkflowNotFound(workflow_id.to_string()),
        Some(w) if w.epoch != presented => StoreError::StaleEpoch {
            workflow_id: workflow_id.to_string(),
            presented,
            current: w.epoch,
        },
        Some(w) => StoreError::NotRunning {
            workflow_id: workflow_id.to_string(),
            status: w.status,
        },
    }
}

/// Compares a step being recorded with the one already at its position.
pub(crate) fn check_existing_step(
    workflow_id: &str,
    existing: &StepRecord,
    new: &crate::NewStep,
) -> StoreResult<crate::Recorded> {
    if existing.name != new.name {
        return Err(StoreError::NonDeterminism {
            workflow_id: workflow_id.to_string(),
            step_id: new.step_id,
            recorded: existing.name.clone(),
            presented: new.name.clone(),
        });
    }
    if existing.outcome != new.outcome {
        return Err(StoreError::StepConflict {
            workflow_id: workflow_id.to_string(),
            step_id: new.step_id,
        });
    }
    Ok(crate::Recorded::AlreadyRecorded)
}

/// A start found its id taken: the same workflow again (an idempotent retry) unless the id
/// belongs to a workflow of another name.
pub(crate) fn existing_start(new: &crate::NewWorkflow, existing: WorkflowRecord) -> StoreResult<crate::Started> {
    if existing.workflow_name != new.workflow_name {
        return Err(StoreError::WorkflowIdConflict {
            workflow_id: new.workflow_id.clone(),
            existing_name: existing.workflow_name,
        });
    }
    Ok(crate::Started {
        workflow: existing,
        created: false,
    })
}

/// A start found its dedup id held by `holder`: refused, or the holder when the caller asked.
pub(crate) fn duplicate_start(new: &crate::NewWorkflow, holder: WorkflowRecord) -> StoreResult<crate::Started> {
    if new.return_existing {
        return Ok(crate::Started {
            workflow: holder,
            created: false,
        });
    }
    Err(StoreError::Duplicate {
        dedup_id: new.dedup_id.clone().unwrap_or_default(),
        holder: holder.workflow_id,
    })
}

/// Pairs claimed workflows with their steps (which arrive sorted by workflow id, then step id).
pub(crate) fn group_steps(
    workflows: Vec<WorkflowRecord>,
    step_rows: Vec<StepRow>,
) -> StoreResult<Vec<crate::ClaimedWorkflow>> {
    let mut by_id: std::collections::HashMap<String, Vec<StepRecord>> = std::collections::HashMap::new();
    for row in step_rows {
        let id = row.workflow_id.clone();
        by_id.entry(id).or_default().push(row.try_into()?);
    }
    Ok(workflows
        .into_iter()
        .map(|w| {
            let steps = by_id.remove(&w.workflow_id).unwrap_or_default();
            crate::ClaimedWorkflow { workflow: w, steps }
        })
        .collect())
}

/// Sorts the (workflow_id, new status) pairs a recovery returned into what it did.
pub(crate) fn recovery(rows: Vec<(String, String)>) -> crate::Recovery {
    let mut r = crate::Recovery::default();
    for (id, status) in rows {
        if status == "ENQUEUED" {
            r.requeued.push(id)
        } else {
            r.dead_lettered.push(id)
        }
    }
    r.requeued.sort();
    r.dead_lettered.sort();
    r
}

pub(crate) fn db_error(e: sqlx::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}
