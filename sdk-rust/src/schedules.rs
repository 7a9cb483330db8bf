//! Schedules from a client: create, change, pause, resume, read, list, remove, trigger and
//! backfill them (`waymark.v1.ScheduleService`). Times are milliseconds since the Unix epoch.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use waymark_proto::{json, v1};

use crate::{types::ms, Client, Error, Started, WorkflowInfo};

/// What a schedule starts and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleDef {
    /// 5 fields (seconds 0) or 6 with seconds first, e.g. `"0 */15 * * * *"`.
    pub cron: String,
    /// IANA time zone; UTC when `None`.
    pub timezone: Option<String>,
    pub workflow_name: String,
    pub input: Value,
    /// "default" when `None`; must exist.
    pub queue: Option<String>,
    /// Create it paused.
    pub paused: bool,
}

impl ScheduleDef {
    /// A schedule starting `workflow_name` with a `null` input at every time `cron` names, in UTC.
    pub fn new(cron: impl Into<String>, workflow_name: impl Into<String>) -> Self {
        ScheduleDef {
            cron: cron.into(),
            timezone: None,
            workflow_name: workflow_name.into(),
            input: Value::Null,
            queue: None,
            paused: false,
        }
    }
}

/// A schedule as the server reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleInfo {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub workflow_name: String,
    pub input: Value,
    pub queue_name: String,
    pub paused: bool,
    /// The last time the scheduler fired it.
    pub last_fire_at_ms: Option<i64>,
    /// When it fires next; `None` while paused.
    pub next_fire_at_ms: Option<i64>,
    /// The next fire times, up to 5 (empty while paused).
    pub upcoming_fire_at_ms: Vec<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Which fields an update replaces; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleUpdate {
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub workflow_name: Option<String>,
    pub input: Option<Value>,
    pub queue: Option<String>,
}

/// One fire time of a backfill and its workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRun {
    pub fire_at_ms: i64,
    pub workflow_id: String,
    /// False when that fire time already had its workflow.
    pub created: bool,
}

use crate::client::timestamp as ts;

impl From<v1::Schedule> for ScheduleInfo {
    fn from(s: v1::Schedule) -> Self {
        ScheduleInfo {
            input: json::from_payload(s.input.as_ref()).unwrap_or(Value::Null),
            last_fire_at_ms: s.last_fire_time.as_ref().map(|t| ms(Some(t))),
            next_fire_at_ms: s.next_fire_time.as_ref().map(|t| ms(Some(t))),
            upcoming_fire_at_ms: s.upcoming_fire_times.iter().map(|t| ms(Some(t))).collect(),
            created_at_ms: ms(s.created_at.as_ref()),
            updated_at_ms: ms(s.updated_at.as_ref()),
            name: s.name,
            cron: s.cron,
            timezone: s.timezone,
            workflow_name: s.workflow_name,
            queue_name: s.queue_name,
            paused: s.paused,
        }
    }
}

fn info(s: Option<v1::Schedule>) -> ScheduleInfo {
    s.unwrap_or_default().into()
}

impl Client {
    /// Creates a schedule; `SCHEDULE_EXISTS` when the name is taken.
    pub async fn create_schedule(&self, name: &str, def: &ScheduleDef) -> Result<ScheduleInfo, Error> {
        let schedule = v1::Schedule {
            name: name.to_string(),
            cron: def.cron.clone(),
            timezone: def.timezone.clone().unwrap_or_default(),
            workflow_name: def.workflow_name.clone(),
            input: Some(json::to_payload(&def.input)),
            queue_name: def.queue.clone().unwrap_or_default(),
            paused: def.paused,
            ..Default::default()
        };
        let r = self
            .schedules
            .clone()
            .create_schedule(v1::CreateScheduleRequest {
                schedule: Some(schedule),
            })
            .await?;
        Ok(info(r.into_inner().schedule))
    }

    /// Replaces the fields `update` names.
    pub async fn update_schedule(&self, name: &str, update: &ScheduleUpdate) -> Result<ScheduleInfo, Error> {
        let mut schedule = v1::Schedule {
            name: name.to_string(),
            ..Default::default()
        };
        let mut paths = Vec::new();
        if let Some(v) = &update.cron {
            schedule.cron = v.clone();
            paths.push("cron");
        }
        if let Some(v) = &update.timezone {
            schedule.timezone = v.clone();
            paths.push("timezone");
        }
        if let Some(v) = &update.workflow_name {
            schedule.workflow_name = v.clone();
            paths.push("workflow_name");
        }
        if let Some(v) = &update.input {
            schedule.input = Some(json::to_payload(v));
            paths.push("input");
        }
        if let Some(v) = &update.queue {
            schedule.queue_name = v.clone();
            paths.push("queue_name");
        }
        if paths.is_empty() {
            return self.get_schedule(name).await;
        }
        let r = self
            .schedules
            .clone()
            .update_schedule(v1::UpdateScheduleRequest {
                schedule: Some(schedule),
                update_mask: Some(prost_types::FieldMask {
                    paths: paths.into_iter().map(String::from).collect(),
                }),
            })
            .await?;
        Ok(info(r.into_inner().schedule))
    }

    pub async fn get_schedule(&self, name: &str) -> Result<ScheduleInfo, Error> {
        let r = self
            .schedules
            .clone()
            .get_schedule(v1::GetScheduleRequest { name: name.into() })
            .await?;
        Ok(info(r.into_inner().schedule))
    }

    /// Every schedule, by name.
    pub async fn list_schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        crate::pages::read_all(|page_token| async move {
            let r = self
                .schedules
                .clone()
                .list_schedules(v1::ListSchedulesRequest {
                    page_size: 0,
                    page_token,
                })
                .await?
                .into_inner();
            Ok((
                r.schedules.into_iter().map(ScheduleInfo::from).collect(),
                r.next_page_token,
            ))
        })
        .await
    }

    /// Removes a schedule; the workflows it started stay.
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        self.schedules
            .clone()
            .delete_schedule(v1::DeleteScheduleRequest { name: name.into() })
            .await?;
        Ok(())
    }

    pub async fn pause_schedule(&self, name: &str) -> Result<ScheduleInfo, Error> {
        let r = self
            .schedules
            .clone()
            .pause_schedule(v1::PauseScheduleRequest { name: name.into() })
            .await?;
        Ok(info(r.into_inner().schedule))
    }

    /// Fires again from the first time after now (times passed while paused are skipped).
    pub async fn resume_schedule(&self, name: &str) -> Result<ScheduleInfo, Error> {
        let r = self
            .schedules
            .clone()
            .resume_schedule(v1::ResumeScheduleRequest { name: name.into() })
            .await?;
        Ok(info(r.into_inner().schedule))
    }

    /// Starts the schedule's workflow now. With a request id, a retried trigger starts one.
    pub async fn trigger_schedule(&self, name: &str, request_id: Option<&str>) -> Result<Started, Error> {
        let r = self
            .schedules
            .clone()
            .trigger_schedule(v1::TriggerScheduleRequest {
                name: name.into(),
                request_id: request_id.unwrap_or_default().into(),
            })
            .await?
            .into_inner();
        let workflow = r
            .workflow
            .map(WorkflowInfo::from)
            .ok_or_else(|| Error::Serialization("the server's answer carried no workflow".into()))?;
        Ok(Started {
            workflow,
            created: r.created,
            // A schedule's trigger does not ask about the name.
            name_registered: true,
        })
    }

    /// Starts a workflow for each fire time from `from_ms` through `to_ms` that has none yet.
    pub async fn backfill_schedule(&self, name: &str, from_ms: i64, to_ms: i64) -> Result<Vec<ScheduleRun>, Error> {
        let r = self
            .schedules
            .clone()
            .backfill_schedule(v1::BackfillScheduleRequest {
                name: name.into(),
                start_time: Some(ts(from_ms)),
                end_time: Some(ts(to_ms)),
            })
            .await?;
        Ok(r.into_inner()
            .runs
            .into_iter()
            .map(|run| ScheduleRun {
                fire_at_ms: ms(run.fire_time.as_ref()),
                workflow_id: run.workflow_id,
                created: run.created,
            })
            .collect())
    }
}
