//! Schedules in the storage contract: what to start and when, as the engine computed it. The
//! store never evaluates a cron expression; it keeps the next fire time the engine hands it and
//! applies a fire or a change only when the schedule is still at the version the engine read.

use crate::{Millis, NewWorkflow, StoreError};

/// What a schedule starts and on which timetable. Kept as given; the engine validates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSpec {
    pub cron: String,
    /// IANA name.
    pub timezone: String,
    pub workflow_name: String,
    /// JSON text.
    pub input: String,
    pub queue_name: String,
}

/// The part of a schedule a create or an update writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleState {
    pub spec: ScheduleSpec,
    pub paused: bool,
    /// `None` while paused or when the expression names no future time: it does not fire.
    pub next_fire_at: Option<Millis>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub name: String,
    pub state: ScheduleState,
    /// The last fire time the scheduler started (not triggers or backfills).
    pub last_fire_at: Option<Millis>,
    /// Raised by every change and every fire; writes name the version they read.
    pub version: u64,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// One fire of a schedule, as the engine planned it from the record at `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleFire {
    pub name: String,
    pub version: u64,
    pub fire_at: Millis,
    /// Where the schedule moves to.
    pub next_fire_at: Option<Millis>,
    /// The workflow this fire time starts (its id derives from the schedule and `fire_at`).
    pub workflow: NewWorkflow,
}

/// Columns of `schedules`, in [`ScheduleRow`] order.
macro_rules! schedule_columns {
    () => {
        "schedule_name, cron, timezone, workflow_name, input, queue_name, paused, last_fire_at, \
         next_fire_at, version, created_at, updated_at"
    };
}
pub(crate) use schedule_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct ScheduleRow {
    pub schedule_name: String,
    pub cron: String,
    pub timezone: String,
    pub workflow_name: String,
    pub input: String,
    pub queue_name: String,
    pub paused: bool,
    pub last_fire_at: Option<i64>,
    pub next_fire_at: Option<i64>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<ScheduleRow> for ScheduleRecord {
    fn from(r: ScheduleRow) -> Self {
        ScheduleRecord {
            name: r.schedule_name,
            state: ScheduleState {
                spec: ScheduleSpec {
                    cron: r.cron,
                    timezone: r.timezone,
                    workflow_name: r.workflow_name,
                    input: r.input,
                    queue_name: r.queue_name,
                },
                paused: r.paused,
                next_fire_at: r.next_fire_at,
            },
            last_fire_at: r.last_fire_at,
            version: r.version as u64,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

pub(crate) fn not_found(name: &str) -> StoreError {
    StoreError::ScheduleNotFound(name.to_string())
}

pub(crate) fn exists(name: &str) -> StoreError {
    StoreError::ScheduleExists(name.to_string())
}
