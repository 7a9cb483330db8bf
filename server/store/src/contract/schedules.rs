//! Schedules, and firing them into workflows.

use async_trait::async_trait;

use crate::*;

/// Schedules, and firing them into workflows.
#[async_trait]
pub trait Schedules: Send + Sync {
    /// Creates a schedule at version 1; `ScheduleExists` when the name is taken.
    async fn create_schedule(&self, name: &str, state: &ScheduleState, now: Millis) -> StoreResult<ScheduleRecord>;

    /// Replaces a schedule's state if it is still at `version` (raising it): `None`, writing
    /// nothing, when it changed or fired since it was read; `ScheduleNotFound` when it is gone.
    async fn update_schedule(
        &self,
        name: &str,
        version: u64,
        state: &ScheduleState,
        now: Millis,
    ) -> StoreResult<Option<ScheduleRecord>>;

    async fn get_schedule(&self, name: &str) -> StoreResult<Option<ScheduleRecord>>;

    /// Every schedule, by name.
    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>>;

    /// Removes a schedule; false when there was none. The workflows it started stay.
    async fn delete_schedule(&self, name: &str) -> StoreResult<bool>;

    /// Up to `limit` unpaused schedules with a next fire time, earliest first: those due, then
    /// the next to come. One indexed read, however many schedules exist.
    async fn upcoming_schedules(&self, limit: u32) -> StoreResult<Vec<ScheduleRecord>>;

    /// Fires a schedule in one transaction: starts `fire.workflow` as `start_workflow` would
    /// (an id already taken is left as it is and returned, whatever its workflow name) and
    /// moves the schedule to `fire.next_fire_at`, recording `fire.fire_at` as its last fire and
    /// raising its version; only while it is unpaused and still at `fire.version`. `None`,
    /// writing nothing, otherwise (another replica fired it, or it changed or went away).
    async fn fire_schedule(&self, fire: &ScheduleFire, now: Millis) -> StoreResult<Option<Started>>;

    /// Starts workflows for schedule `name` outside its timetable (a trigger, a backfill), all
    /// in one transaction, each as `start_workflow` would; ids already taken are left as they
    /// are and returned with `created` false, whatever their workflow name. The schedule's own
    /// row is not changed. `ScheduleNotFound` when the schedule does not exist.
    async fn start_scheduled(&self, name: &str, workflows: &[NewWorkflow], now: Millis) -> StoreResult<Vec<Started>>;
}
