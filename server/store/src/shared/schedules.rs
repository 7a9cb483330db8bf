//! Schedules. A fire reads the schedule's row fenced on the version the engine read, locking
//! it with `FOR UPDATE SKIP LOCKED` on PostgreSQL: a replica racing on the same fire skips the
//! row instead of queueing behind it, and one that reads the row after the first committed
//! finds the version moved. The workflow insert and the schedule's move commit together. (On
//! SQLite the one writer connection keeps the three statements from interleaving with others.)

use crate::dialect::{sql, Backend};
use crate::rows::db_error;
use crate::schedules::{self, schedule_columns, ScheduleRow};
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Schedules for B {
    #[tracing::instrument(name = "store.create_schedule", level = "debug", target = "waymark::store", skip_all)]
    async fn create_schedule(&self, name: &str, state: &ScheduleState, now: Millis) -> StoreResult<ScheduleRecord> {
        let sp = &state.spec;
        let row: Option<ScheduleRow> = B::query_as(concat!(
            "INSERT INTO schedules (schedule_name, cron, timezone, workflow_name, input, queue_name, paused, \
               next_fire_at, version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $9) \
             ON CONFLICT (schedule_name) DO NOTHING RETURNING ",
            schedule_columns!()
        ))
        .bind(name)
        .bind(&sp.cron)
        .bind(&sp.timezone)
        .bind(&sp.workflow_name)
        .bind(&sp.input)
        .bind(&sp.queue_name)
        .bind(state.paused)
        .bind(state.next_fire_at)
        .bind(now)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        row.map(Into::into).ok_or_else(|| schedules::exists(name))
    }

    #[tracing::instrument(name = "store.update_schedule", level = "debug", target = "waymark::store", skip_all)]
    async fn update_schedule(
        &self,
        name: &str,
        version: u64,
        state: &ScheduleState,
        now: Millis,
    ) -> StoreResult<Option<ScheduleRecord>> {
        let sp = &state.spec;
        let row: Option<ScheduleRow> = B::query_as(concat!(
            "UPDATE schedules SET cron = $3, timezone = $4, workflow_name = $5, input = $6, queue_name = $7, \
               paused = $8, next_fire_at = $9, version = version + 1, updated_at = $10 \
             WHERE schedule_name = $1 AND version = $2 RETURNING ",
            schedule_columns!()
        ))
        .bind(name)
        .bind(version as i64)
        .bind(&sp.cron)
        .bind(&sp.timezone)
        .bind(&sp.workflow_name)
        .bind(&sp.input)
        .bind(&sp.queue_name)
        .bind(state.paused)
        .bind(state.next_fire_at)
        .bind(now)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => Ok(Some(r.into())),
            // Moved on since it was read, or gone: say which.
            None => match self.get_schedule(name).await? {
                Some(_) => Ok(None),
                None => Err(schedules::not_found(name)),
            },
        }
    }

    #[tracing::instrument(name = "store.get_schedule", level = "debug", target = "waymark::store", skip_all)]
    async fn get_schedule(&self, name: &str) -> StoreResult<Option<ScheduleRecord>> {
        let row: Option<ScheduleRow> = B::query_as(concat!(
            "SELECT ",
            schedule_columns!(),
            " FROM schedules WHERE schedule_name = $1"
        ))
        .bind(name)
        .fetch_optional(self.reader())
        .await
        .map_err(db_error)?;
        Ok(row.map(Into::into))
    }

    #[tracing::instrument(name = "store.list_schedules", level = "debug", target = "waymark::store", skip_all)]
    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>> {
        let rows: Vec<ScheduleRow> = B::query_as(concat!(
            "SELECT ",
            schedule_columns!(),
            " FROM schedules ORDER BY schedule_name"
        ))
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    #[tracing::instrument(name = "store.delete_schedule", level = "debug", target = "waymark::store", skip_all)]
    async fn delete_schedule(&self, name: &str) -> StoreResult<bool> {
        let done = B::query("DELETE FROM schedules WHERE schedule_name = $1")
            .bind(name)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(
        name = "store.upcoming_schedules",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn upcoming_schedules(&self, limit: u32) -> StoreResult<Vec<ScheduleRecord>> {
        // The WHERE clause repeats the partial index's condition so the planner uses it.
        let rows: Vec<ScheduleRow> = B::query_as(sql!(B:
            "SELECT ",
            schedule_columns!(),
            " FROM schedules WHERE ",
            B::UNPAUSED,
            " AND next_fire_at IS NOT NULL ORDER BY next_fire_at LIMIT $1"
        ))
        .bind(limit as i64)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    #[tracing::instrument(name = "store.fire_schedule", level = "debug", target = "waymark::store", skip_all)]
    async fn fire_schedule(&self, fire: &ScheduleFire, now: Millis) -> StoreResult<Option<Started>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let held: Option<i64> = B::query_scalar(sql!(B:
            "SELECT version FROM schedules WHERE schedule_name = $1 AND version = $2 AND ",
            B::UNPAUSED,
            B::SKIP_LOCKED
        ))
        .bind(&fire.name)
        .bind(fire.version as i64)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        if held.is_none() {
            return Ok(None);
        }
        let started = B::insert_workflow(&mut tx, &fire.workflow, now).await?;
        B::query(
            "UPDATE schedules SET last_fire_at = $2, next_fire_at = $3, version = version + 1, updated_at = $4 \
             WHERE schedule_name = $1",
        )
        .bind(&fire.name)
        .bind(fire.fire_at)
        .bind(fire.next_fire_at)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        if started.created && started.workflow.status == WorkflowStatus::Enqueued {
            self.announce_soon(crate::changes::Change::enqueued());
        }
        Ok(Some(started))
    }

    #[tracing::instrument(name = "store.start_scheduled", level = "debug", target = "waymark::store", skip_all)]
    async fn start_scheduled(&self, name: &str, workflows: &[NewWorkflow], now: Millis) -> StoreResult<Vec<Started>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let exists: Option<i64> = B::query_scalar(sql!(B:
            "SELECT CAST(1 AS BIGINT) FROM schedules WHERE schedule_name = $1",
            B::FOR_SHARE
        ))
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        if exists.is_none() {
            return Err(schedules::not_found(name));
        }
        let mut started = Vec::with_capacity(workflows.len());
        for new in workflows {
            started.push(B::insert_workflow(&mut tx, new, now).await?);
        }
        tx.commit().await.map_err(db_error)?;
        if started
            .iter()
            .any(|s| s.created && s.workflow.status == WorkflowStatus::Enqueued)
        {
            self.announce_soon(crate::changes::Change::enqueued());
        }
        Ok(started)
    }
}
