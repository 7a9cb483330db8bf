//! `waymark.v1.ScheduleService`: schedules as server resources. Converts, calls the engine, maps
//! errors.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use waymark_proto::v1::{self, schedule_service_server::ScheduleService};
use waymark_store::{Millis, ScheduleRecord};

use super::{
    audit::{note_resource, noted},
    convert,
    status::invalid,
    status::to_status,
};
use crate::engine::schedules::{NewSchedule, ScheduleChanges};
use crate::namespaces::Namespaces;

pub struct ScheduleApi {
    pub namespaces: Arc<Namespaces>,
}

/// How many fire times a schedule's `upcoming_fire_times` lists.
const UPCOMING: usize = 5;

/// The next fire times from `next` on (none while paused).
fn upcoming(cron: &str, timezone: &str, next: Option<Millis>) -> Vec<prost_types::Timestamp> {
    let Some(first) = next else { return Vec::new() };
    let Ok(table) = crate::engine::schedules::cron::Timetable::parse(cron, timezone) else {
        return convert::timestamp(first).into_iter().collect();
    };
    std::iter::successors(Some(first), |t| table.next_after(*t))
        .take(UPCOMING)
        .filter_map(convert::timestamp)
        .collect()
}

fn to_wire(s: ScheduleRecord) -> v1::Schedule {
    let spec = s.state.spec;
    let next = s.state.next_fire_at.filter(|_| !s.state.paused);
    let upcoming_fire_times = upcoming(&spec.cron, &spec.timezone, next);
    v1::Schedule {
        name: s.name,
        cron: spec.cron,
        timezone: spec.timezone,
        workflow_name: spec.workflow_name,
        input: convert::payload(&spec.input),
        queue_name: spec.queue_name,
        paused: s.state.paused,
        last_fire_time: s.last_fire_at.and_then(convert::timestamp),
        next_fire_time: s.state.next_fire_at.and_then(convert::timestamp),
        created_at: convert::timestamp(s.created_at),
        updated_at: convert::timestamp(s.updated_at),
        upcoming_fire_times,
    }
}

fn schedule_of(s: Option<v1::Schedule>) -> Result<v1::Schedule, Status> {
    s.ok_or_else(|| invalid("the request needs a schedule"))
}

/// The fields an update names (all of them for an empty mask), taken from `schedule`.
fn changes_from_wire(s: v1::Schedule, mask: Option<&prost_types::FieldMask>) -> Result<ScheduleChanges, Status> {
    let paths: Vec<&str> = match mask {
        Some(m) if !m.paths.is_empty() => m.paths.iter().map(String::as_str).collect(),
        _ => vec!["cron", "timezone", "workflow_name", "input", "queue_name"],
    };
    let mut changes = ScheduleChanges::default();
    for p in paths {
        match p {
            "cron" => changes.cron = Some(s.cron.clone()),
            "timezone" => changes.timezone = Some(s.timezone.clone()),
            "workflow_name" => changes.workflow_name = Some(s.workflow_name.clone()),
            "input" => changes.input = Some(convert::payload_text("input", s.input.as_ref())?),
            "queue_name" => changes.queue_name = Some(s.queue_name.clone()),
            "paused" => {
                return Err(invalid(
                    "pause and resume a schedule with PauseSchedule and ResumeSchedule",
                ))
            }
            other => {
                return Err(invalid(format!(
                    "update_mask names {other:?}; a schedule's changeable fields are cron, timezone, workflow_name, \
                     input and queue_name"
                )))
            }
        }
    }
    Ok(changes)
}

fn time(field: &str, t: Option<&prost_types::Timestamp>) -> Result<i64, Status> {
    t.map(convert::millis)
        .ok_or_else(|| invalid(format!("the backfill needs a {field}")))
}

#[tonic::async_trait]
impl ScheduleService for ScheduleApi {
    async fn create_schedule(
        &self,
        req: Request<v1::CreateScheduleRequest>,
    ) -> Result<Response<v1::CreateScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let s = schedule_of(req.into_inner().schedule)?;
        note_resource(&s.name);
        let new = NewSchedule {
            input: convert::payload_text("input", s.input.as_ref())?,
            name: s.name,
            cron: s.cron,
            timezone: s.timezone,
            workflow_name: s.workflow_name,
            queue_name: s.queue_name,
            paused: s.paused,
        };
        let created = engine.schedules().create(new).await.map_err(to_status)?;
        Ok(Response::new(v1::CreateScheduleResponse {
            schedule: Some(to_wire(created)),
        }))
    }

    async fn update_schedule(
        &self,
        req: Request<v1::UpdateScheduleRequest>,
    ) -> Result<Response<v1::UpdateScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let s = schedule_of(r.schedule)?;
        let name = noted(s.name.clone());
        let changes = changes_from_wire(s, r.update_mask.as_ref())?;
        let updated = engine.schedules().update(&name, changes).await.map_err(to_status)?;
        Ok(Response::new(v1::UpdateScheduleResponse {
            schedule: Some(to_wire(updated)),
        }))
    }

    async fn get_schedule(
        &self,
        req: Request<v1::GetScheduleRequest>,
    ) -> Result<Response<v1::GetScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let s = engine
            .schedules()
            .get(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::GetScheduleResponse {
            schedule: Some(to_wire(s)),
        }))
    }

    async fn list_schedules(
        &self,
        req: Request<v1::ListSchedulesRequest>,
    ) -> Result<Response<v1::ListSchedulesResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let page = engine
            .schedules_page(&super::workflow_service::page_request(r.page_size, r.page_token))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListSchedulesResponse {
            schedules: page.items.into_iter().map(to_wire).collect(),
            next_page_token: page.next_token,
        }))
    }

    async fn delete_schedule(
        &self,
        req: Request<v1::DeleteScheduleRequest>,
    ) -> Result<Response<v1::DeleteScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        engine
            .schedules()
            .delete(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::DeleteScheduleResponse {}))
    }

    async fn pause_schedule(
        &self,
        req: Request<v1::PauseScheduleRequest>,
    ) -> Result<Response<v1::PauseScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let s = engine
            .schedules()
            .pause(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::PauseScheduleResponse {
            schedule: Some(to_wire(s)),
        }))
    }

    async fn resume_schedule(
        &self,
        req: Request<v1::ResumeScheduleRequest>,
    ) -> Result<Response<v1::ResumeScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let s = engine
            .schedules()
            .resume(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ResumeScheduleResponse {
            schedule: Some(to_wire(s)),
        }))
    }

    async fn trigger_schedule(
        &self,
        req: Request<v1::TriggerScheduleRequest>,
    ) -> Result<Response<v1::TriggerScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_resource(&r.name);
        let started = engine
            .schedules()
            .trigger(&r.name, &r.request_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::TriggerScheduleResponse {
            workflow: Some(convert::workflow(started.workflow)),
            created: started.created,
        }))
    }

    async fn backfill_schedule(
        &self,
        req: Request<v1::BackfillScheduleRequest>,
    ) -> Result<Response<v1::BackfillScheduleResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_resource(&r.name);
        let from = time("start_time", r.start_time.as_ref())?;
        let to = time("end_time", r.end_time.as_ref())?;
        let runs = engine
            .schedules()
            .backfill(&r.name, from, to)
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::BackfillScheduleResponse {
            runs: runs
                .into_iter()
                .map(|(at, s)| v1::ScheduleRun {
                    fire_time: convert::timestamp(at),
                    workflow_id: s.workflow.workflow_id,
                    created: s.created,
                })
                .collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn upcoming_fire_times_follow_the_expression() {
        // 2026-03-07T14:30:00Z, a Saturday.
        let first = 1_772_893_800_000;
        let times: Vec<i64> = super::upcoming("30 14 * * *", "UTC", Some(first))
            .iter()
            .map(|t| t.seconds * 1000)
            .collect();
        assert_eq!(times.len(), super::UPCOMING);
        assert!(times.windows(2).all(|w| w[1] - w[0] == 86_400_000), "{times:?}");
        assert_eq!(times[0], first);
        assert!(super::upcoming("30 14 * * *", "UTC", None).is_empty());
    }
}
