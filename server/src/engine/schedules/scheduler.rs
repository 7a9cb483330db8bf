//! The scheduler: one task per replica that fires due schedules.
//!
//! It reads the earliest upcoming schedules in one indexed query, fires those that are due,
//! and sleeps until the next fire time it knows of — woken early when a schedule changes
//! through this replica, and looking again at least every poll interval for schedules changed
//! through others. Nothing is read per schedule while idle.
//!
//! Every replica does this at once; the store's fenced fire makes a fire time start one
//! workflow and advance the schedule once, whoever wins. A replica that dies mid-fire either
//! committed the whole fire or nothing of it, and the schedule stays due for the others.

use std::{sync::Arc, time::Duration};

use waymark_store::{Millis, ScheduleFire, ScheduleRecord};

use super::{cron, scheduled_start, Timetable};
use crate::engine::Engine;

/// Schedules read per query.
const BATCH: u32 = 64;

pub async fn run(engine: Arc<Engine>) {
    let mut shutdown = engine.shutdown_signal();
    loop {
        if engine.is_shutting_down() {
            return;
        }
        let next = fire_due(&engine).await;
        let mut wait = engine.core.poll_interval();
        if let Some(at) = next {
            wait = wait.min(Duration::from_millis((at - engine.core.now()).max(0) as u64));
        }
        tokio::select! {
            _ = engine.schedules.changed() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

/// Fires every due schedule. Returns the earliest fire time still to come, as far as this pass
/// knows (`None`: nothing scheduled, or the database could not be read).
pub async fn fire_due(engine: &Engine) -> Option<Millis> {
    loop {
        let now = engine.core.now();
        let upcoming = match engine.core.store.upcoming_schedules(BATCH).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(error = %e, "reading the schedules failed");
                return None;
            }
        };
        let mut earliest: Option<Millis> = None;
        let (mut all_due, mut progressed) = (true, false);
        for s in &upcoming {
            let Some(due) = s.state.next_fire_at else { continue };
            let next = if due > now {
                all_due = false;
                Some(due)
            } else {
                let (next, done) = fire(engine, s, due, now).await;
                progressed |= done;
                next
            };
            earliest = match (earliest, next) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if !all_due {
                break;
            }
        }
        // A full batch of due schedules that moved on: there may be more behind it.
        if !(all_due && progressed && upcoming.len() == BATCH as usize) {
            return earliest;
        }
    }
}

/// Plans and applies one fire of a due schedule. Returns where the schedule moves to, and
/// whether it did move (here or through another replica) rather than fail.
async fn fire(engine: &Engine, s: &ScheduleRecord, due: Millis, now: Millis) -> (Option<Millis>, bool) {
    let spec = &s.state.spec;
    let timetable = match Timetable::parse(&spec.cron, &spec.timezone) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(schedule = %s.name, error = %e, "stored schedule cannot be read; not fired");
            return (None, false);
        }
    };
    let plan = plan_fire(s, &timetable, due, now);
    let next = plan.next_fire_at;
    let moved = match engine.core.store.fire_schedule(&plan, now).await {
        Ok(Some(started)) => {
            let w = &started.workflow;
            if w.workflow_name != spec.workflow_name {
                tracing::warn!(schedule = %s.name, workflow_id = %w.workflow_id, existing = %w.workflow_name,
                    "the fire's workflow id is taken by another workflow; this fire time is skipped");
            } else {
                tracing::info!(schedule = %s.name, workflow_id = %w.workflow_id, created = started.created, "schedule fired");
            }
            if started.created {
                engine.core.work_enqueued();
            }
            true
        }
        // Another replica fired it first, or it changed since it was read.
        Ok(None) => {
            tracing::debug!(schedule = %s.name, "fire skipped: the schedule moved on");
            true
        }
        Err(e) => {
            tracing::warn!(schedule = %s.name, error = %e, "firing a schedule failed; it stays due");
            false
        }
    };
    (next, moved)
}

/// The fire of schedule `s`, due at `due`, seen at `now`. Missed fire times are not replayed:
/// the latest one due fires, once, and the schedule moves to the first time after now.
pub(crate) fn plan_fire(s: &ScheduleRecord, timetable: &Timetable, due: Millis, now: Millis) -> ScheduleFire {
    let fire_at = timetable.latest_at_or_before(now).filter(|&t| t >= due).unwrap_or(due);
    ScheduleFire {
        name: s.name.clone(),
        version: s.version,
        fire_at,
        next_fire_at: timetable.next_after(now.max(fire_at)),
        workflow: scheduled_start(s, cron::fire_workflow_id(&s.name, fire_at)),
    }
}
