//! The lists clients read, a page at a time (see [`pages`](super::pages)): a workflow's steps,
//! messages and events, the queues and the schedules.

use waymark_store::{EventRecord, MessageRecord, Outcome, QueueRecord, ScheduleRecord, StepRecord};

use super::{
    pages::{numeric_key, page, Page, PageRequest},
    Engine, EngineResult,
};

/// Most items a page of a workflow's steps, messages or events holds.
pub const MOST_PER_PAGE: usize = 10_000;
/// Most queues or schedules a page holds.
pub const MOST_RESOURCES_PER_PAGE: usize = 1_000;

impl Engine {
    pub async fn steps_page(&self, workflow_id: &str, req: &PageRequest) -> EngineResult<Page<StepRecord>> {
        let steps = self.workflows.list_steps(workflow_id).await?;
        let bytes = |s: &StepRecord| {
            s.name.len()
                + match &s.outcome {
                    Outcome::Output(o) => o.len(),
                    Outcome::Failure(f) => f.kind.len() + f.message.len(),
                }
        };
        page(
            steps,
            |s| numeric_key(s.step_id as u64),
            bytes,
            req,
            MOST_PER_PAGE,
            self.core.page_budget(),
        )
    }

    pub async fn messages_page(&self, workflow_id: &str, req: &PageRequest) -> EngineResult<Page<MessageRecord>> {
        let messages = self.messaging.list_messages(workflow_id).await?;
        // Oldest first, as sent; the id breaks ties within a millisecond.
        let key = |m: &MessageRecord| format!("{}:{}", numeric_key(m.sent_at.max(0) as u64), m.message_id);
        page(
            messages,
            key,
            |m| m.payload.len() + m.topic.len(),
            req,
            MOST_PER_PAGE,
            self.core.page_budget(),
        )
    }

    pub async fn events_page(&self, workflow_id: &str, req: &PageRequest) -> EngineResult<Page<EventRecord>> {
        let events = self.messaging.list_events(workflow_id).await?;
        let bytes =
            |e: &EventRecord| e.key.len() + e.value.len() + e.history.iter().map(|h| h.value.len()).sum::<usize>();
        page(
            events,
            |e| e.key.clone(),
            bytes,
            req,
            MOST_PER_PAGE,
            self.core.page_budget(),
        )
    }

    pub async fn queues_page(&self, req: &PageRequest) -> EngineResult<Page<QueueRecord>> {
        let queues = self.queues.list().await?;
        page(
            queues,
            |q| q.name.clone(),
            |q| q.name.len() + 64,
            req,
            MOST_RESOURCES_PER_PAGE,
            self.core.page_budget(),
        )
    }

    pub async fn schedules_page(&self, req: &PageRequest) -> EngineResult<Page<ScheduleRecord>> {
        let schedules = self.schedules.list().await?;
        let bytes = |s: &ScheduleRecord| s.name.len() + s.state.spec.input.len() + 256;
        page(
            schedules,
            |s| s.name.clone(),
            bytes,
            req,
            MOST_RESOURCES_PER_PAGE,
            self.core.page_budget(),
        )
    }
}
