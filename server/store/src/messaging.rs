//! Rows of messages, events and streams, as read from either backend.

#[derive(sqlx::FromRow)]
pub(crate) struct StreamRow {
    pub position: i64,
    pub value: Option<String>,
    pub closed: bool,
}

impl From<StreamRow> for crate::StreamEntry {
    fn from(r: StreamRow) -> Self {
        crate::StreamEntry {
            offset: r.position as u64,
            value: r.value,
            closed: r.closed,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct MessageRow {
    pub message_id: String,
    pub workflow_id: String,
    pub topic: String,
    pub payload: String,
    pub idempotency_key: Option<String>,
    pub sent_at: i64,
    pub consumed_at: Option<i64>,
    pub consumed_by_step: Option<i64>,
}

impl From<MessageRow> for crate::MessageRecord {
    fn from(r: MessageRow) -> Self {
        crate::MessageRecord {
            message_id: r.message_id,
            workflow_id: r.workflow_id,
            topic: r.topic,
            payload: r.payload,
            idempotency_key: r.idempotency_key,
            sent_at: r.sent_at,
            consumed_at: r.consumed_at,
            consumed_by_step: r.consumed_by_step.map(|s| s as u32),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    pub event_key: String,
    pub value: String,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct EventHistoryRow {
    pub event_key: String,
    pub value: String,
    pub step_id: i64,
    pub set_at: i64,
}

/// Current values and history rows (both ordered) as event records.
pub(crate) fn events(current: Vec<EventRow>, history: Vec<EventHistoryRow>) -> Vec<crate::EventRecord> {
    let mut out: Vec<crate::EventRecord> = current
        .into_iter()
        .map(|e| crate::EventRecord {
            key: e.event_key,
            value: e.value,
            updated_at: e.updated_at,
            history: Vec::new(),
        })
        .collect();
    for h in history {
        if let Some(e) = out.iter_mut().find(|e| e.key == h.event_key) {
            e.history.push(crate::EventValue {
                value: h.value,
                step_id: h.step_id as u32,
                set_at: h.set_at,
            });
        }
    }
    out
}
