//! The schedules service: schedules as server resources, created, changed, paused, resumed,
//! read and removed by operators; fired by every replica's [`scheduler`]; triggered or
//! backfilled on request.
//!
//! The engine owns the cron math ([`cron`]): it computes each next fire time and hands it to
//! the store, which keeps it and applies a change or a fire only at the version it was planned
//! from. Changes are read-compute-write, retried when the schedule moved meanwhile (a fire
//! through another replica, say).

use std::sync::Arc;

use tokio::sync::Notify;
use waymark_store::{Millis, NewWorkflow, ScheduleRecord, ScheduleSpec, ScheduleState, Started};

use super::{queues::Queues, validate, Core, EngineError, EngineResult, ErrorCode};

pub mod cron;
pub mod scheduler;

use cron::Timetable;

/// Longest schedule name: short enough that every id built from it fits the id limit.
const MAX_NAME_LEN: usize = 128;
/// Most fire times one backfill starts.
pub const MAX_BACKFILL: usize = 1000;
/// Read-compute-write rounds before a change gives up on a schedule that keeps moving.
const MAX_CHANGE_ROUNDS: usize = 16;

/// A schedule as an operator writes it. Empty `timezone` is UTC, empty `queue_name` "default".
#[derive(Debug, Clone, Default)]
pub struct NewSchedule {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub workflow_name: String,
    /// JSON text.
    pub input: String,
    pub queue_name: String,
    pub paused: bool,
}

/// The fields an update replaces; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct ScheduleChanges {
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub workflow_name: Option<String>,
    /// JSON text.
    pub input: Option<String>,
    pub queue_name: Option<String>,
}

/// The start a schedule makes — for a fire, a trigger or a backfill alike. The one place a
/// scheduled workflow is shaped, so start options added later land here once.
pub(crate) fn scheduled_start(s: &ScheduleRecord, workflow_id: String) -> NewWorkflow {
    let spec = &s.state.spec;
    NewWorkflow {
        workflow_id,
        workflow_name: spec.workflow_name.clone(),
        queue_name: spec.queue_name.clone(),
        app_version: None,
        input: spec.input.clone(),
        parent_workflow_id: None,
        deadline_at: None,
        ..Default::default()
    }
}

pub(crate) fn schedule_not_found(name: &str) -> EngineError {
    EngineError::new(
        ErrorCode::NotFound,
        "SCHEDULE_NOT_FOUND",
        format!("schedule {name:?} does not exist"),
    )
}

/// Schedule names end up in workflow ids, CLI arguments and URLs: a plain alphabet.
fn check_name(name: &str) -> EngineResult<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(EngineError::invalid(format!(
            "schedule name must be 1-{MAX_NAME_LEN} characters"
        )));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(EngineError::invalid(format!(
            "schedule name {name:?} may only hold letters, digits, '-', '_' and '.'"
        )));
    }
    Ok(())
}

fn or_default(v: &str, default: &str) -> String {
    if v.is_empty() { default } else { v }.to_string()
}

/// Checks a spec and fills its defaults; returns it with its timetable. (Whether its queue
/// exists is asked of the store separately.)
fn prepare(mut spec: ScheduleSpec, max_payload: usize) -> EngineResult<(ScheduleSpec, Timetable)> {
    spec.timezone = or_default(&spec.timezone, cron::DEFAULT_TIMEZONE);
    spec.queue_name = or_default(&spec.queue_name, waymark_store::DEFAULT_QUEUE);
    let timetable = Timetable::parse(&spec.cron, &spec.timezone)?;
    validate::name("workflow_name", &spec.workflow_name)?;
    validate::name("queue_name", &spec.queue_name)?;
    validate::payload("input", &spec.input, max_payload)?;
    Ok((spec, timetable))
}

/// The first fire after `now`; an expression that names no future time is refused.
fn first_fire(spec: &ScheduleSpec, timetable: &Timetable, now: Millis) -> EngineResult<Millis> {
    timetable.next_after(now).ok_or_else(|| {
        EngineError::new(
            ErrorCode::InvalidArgument,
            "INVALID_CRON",
            format!("cron expression {:?} names no time in the future", spec.cron),
        )
    })
}

impl ScheduleChanges {
    fn apply_to(&self, old: &ScheduleSpec) -> ScheduleSpec {
        let pick = |new: &Option<String>, old: &String| new.clone().unwrap_or_else(|| old.clone());
        ScheduleSpec {
            cron: pick(&self.cron, &old.cron),
            timezone: pick(&self.timezone, &old.timezone),
            workflow_name: pick(&self.workflow_name, &old.workflow_name),
            input: pick(&self.input, &old.input),
            queue_name: pick(&self.queue_name, &old.queue_name),
        }
    }
}

/// Schedules: the operators' calls, and what wakes this replica's scheduler.
pub struct Schedules {
    core: Arc<Core>,
    /// Every schedule's queue must exist.
    queues: Arc<Queues>,
    /// Wakes the scheduler: a schedule was created or changed through this replica.
    changed: Notify,
}

impl Schedules {
    pub(crate) fn new(core: Arc<Core>, queues: Arc<Queues>) -> Schedules {
        Schedules {
            core,
            queues,
            changed: Notify::new(),
        }
    }

    /// Resolves when a schedule was created or changed through this replica since the last call.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    fn now(&self) -> Millis {
        self.core.now()
    }

    pub async fn create(&self, new: NewSchedule) -> EngineResult<ScheduleRecord> {
        check_name(&new.name)?;
        let spec = ScheduleSpec {
            cron: new.cron,
            timezone: new.timezone,
            workflow_name: new.workflow_name,
            input: new.input,
            queue_name: new.queue_name,
        };
        let (spec, timetable) = prepare(spec, self.core.config.max_payload_bytes)?;
        self.queues.check(&spec.queue_name).await?;
        let now = self.now();
        let first = first_fire(&spec, &timetable, now)?;
        let state = ScheduleState {
            spec,
            paused: new.paused,
            next_fire_at: (!new.paused).then_some(first),
        };
        let created = self.core.store.create_schedule(&new.name, &state, now).await?;
        self.changed.notify_one();
        Ok(created)
    }

    /// Replaces the fields `changes` names. A new cron or time zone moves the next fire to the
    /// first time after now; other changes leave the planned next fire as it is.
    pub async fn update(&self, name: &str, changes: ScheduleChanges) -> EngineResult<ScheduleRecord> {
        let current = self.get(name).await?;
        let (spec, _) = prepare(
            changes.apply_to(&current.state.spec),
            self.core.config.max_payload_bytes,
        )?;
        self.queues.check(&spec.queue_name).await?;
        let (max_payload, now) = (self.core.config.max_payload_bytes, self.now());
        self.change(name, |s| {
            // Applied to the schedule as it is at each round, so fields nobody named stay.
            let (spec, timetable) = prepare(changes.apply_to(&s.state.spec), max_payload)?;
            let retimed = spec.cron != s.state.spec.cron || spec.timezone != s.state.spec.timezone;
            let mut state = s.state.clone();
            if retimed && !state.paused {
                state.next_fire_at = Some(first_fire(&spec, &timetable, now)?);
            }
            state.spec = spec;
            Ok(state)
        })
        .await
    }

    pub async fn pause(&self, name: &str) -> EngineResult<ScheduleRecord> {
        check_name(name)?;
        self.change(name, |s| {
            Ok(ScheduleState {
                paused: true,
                next_fire_at: None,
                ..s.state.clone()
            })
        })
        .await
    }

    /// Fire times passed while paused are skipped: the next fire is the first after now.
    pub async fn resume(&self, name: &str) -> EngineResult<ScheduleRecord> {
        check_name(name)?;
        let now = self.now();
        self.change(name, |s| {
            if !s.state.paused {
                return Ok(s.state.clone());
            }
            let timetable = Timetable::parse(&s.state.spec.cron, &s.state.spec.timezone)?;
            Ok(ScheduleState {
                paused: false,
                next_fire_at: timetable.next_after(now),
                ..s.state.clone()
            })
        })
        .await
    }

    /// Reads the schedule, computes its new state with `f` and writes it at the version read;
    /// again when it moved meanwhile. A state that does not change is not written.
    async fn change<F>(&self, name: &str, f: F) -> EngineResult<ScheduleRecord>
    where
        F: Fn(&ScheduleRecord) -> EngineResult<ScheduleState>,
    {
        for _ in 0..MAX_CHANGE_ROUNDS {
            let current = self.get(name).await?;
            let state = f(&current)?;
            if state == current.state {
                return Ok(current);
            }
            if let Some(done) = self
                .core
                .store
                .update_schedule(name, current.version, &state, self.now())
                .await?
            {
                self.changed.notify_one();
                return Ok(done);
            }
        }
        Err(EngineError::new(
            ErrorCode::Aborted,
            "SCHEDULE_BUSY",
            format!("schedule {name:?} kept changing while this change was applied; retry"),
        ))
    }

    pub async fn get(&self, name: &str) -> EngineResult<ScheduleRecord> {
        check_name(name)?;
        self.core
            .store
            .get_schedule(name)
            .await?
            .ok_or_else(|| schedule_not_found(name))
    }

    pub async fn list(&self) -> EngineResult<Vec<ScheduleRecord>> {
        Ok(self.core.store.list_schedules().await?)
    }

    pub async fn delete(&self, name: &str) -> EngineResult<()> {
        check_name(name)?;
        if self.core.store.delete_schedule(name).await? {
            Ok(())
        } else {
            Err(schedule_not_found(name))
        }
    }

    /// Starts the schedule's workflow now, paused or not, without touching its timetable. With
    /// a `request_id` the id is derived from it, so a retried trigger starts one workflow.
    pub async fn trigger(&self, name: &str, request_id: &str) -> EngineResult<Started> {
        check_name(name)?;
        let s = self.get(name).await?;
        let suffix = if request_id.is_empty() {
            cron::rfc3339(self.now())
        } else {
            request_id.to_string()
        };
        let id = format!("schedule:{name}:trigger:{suffix}");
        validate::name("the trigger's workflow id", &id)?;
        self.queues.check(&s.state.spec.queue_name).await?;
        let started = self.start(name, vec![scheduled_start(&s, id)]).await?;
        Ok(started.into_iter().next().expect("one start asked, one answered"))
    }

    /// Starts one workflow per fire time from `from` through `to`, with the ids the scheduler
    /// uses: times that already have their workflow get none. Returns each time's start.
    pub async fn backfill(&self, name: &str, from: Millis, to: Millis) -> EngineResult<Vec<(Millis, Started)>> {
        check_name(name)?;
        if from > to {
            return Err(EngineError::invalid("the backfill's start time is after its end time"));
        }
        if to > self.now() {
            return Err(EngineError::invalid(
                "the backfill's end time is in the future; the scheduler fires those times itself",
            ));
        }
        let s = self.get(name).await?;
        let timetable = Timetable::parse(&s.state.spec.cron, &s.state.spec.timezone)?;
        let times = timetable.between(from, to, MAX_BACKFILL).map_err(|_| {
            EngineError::invalid(format!(
                "the range holds more than {MAX_BACKFILL} fire times; backfill it in parts"
            ))
        })?;
        self.queues.check(&s.state.spec.queue_name).await?;
        let starts = times
            .iter()
            .map(|&at| scheduled_start(&s, cron::fire_workflow_id(name, at)))
            .collect();
        let started = self.start(name, starts).await?;
        Ok(times.into_iter().zip(started).collect())
    }

    async fn start(&self, name: &str, starts: Vec<NewWorkflow>) -> EngineResult<Vec<Started>> {
        if self.core.is_shutting_down() {
            return Err(EngineError::shutting_down());
        }
        let started = self.core.store.start_scheduled(name, &starts, self.now()).await?;
        if started.iter().any(|s| s.created) {
            self.core.work_enqueued();
        }
        Ok(started)
    }
}

#[cfg(test)]
mod tests;
