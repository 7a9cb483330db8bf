//! Start-and-send: start a workflow unless its id was started already, and send it a message,
//! in one transaction (`Store::start_and_send`). The message is there before the workflow
//! first runs; a retry with the same id and idempotency key neither starts nor sends twice.

use waymark_store::{NewMessage, Sent, Started};

use super::{
    messages::validate_message,
    validate,
    workflows::{StartRequest, Workflows},
    EngineError, EngineResult,
};

/// The message a start-and-send delivers.
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub topic: String,
    /// JSON text.
    pub message: String,
    /// "" for none.
    pub idempotency_key: String,
}

impl Workflows {
    /// Starts `start` unless its id is taken and delivers `message` to the workflow started or
    /// found; also says whether a worker has registered its name. A debounced start is refused:
    /// collapsed onto another start, it would never run as itself.
    pub async fn start_and_send(&self, start: StartRequest, message: Message) -> EngineResult<(Started, bool, Sent)> {
        if !start.debounce_key.is_empty() {
            return Err(EngineError::invalid(
                "start-and-send cannot debounce: send to the debounced workflow once it has started",
            ));
        }
        // Not straight to a worker: the workflow is dispatched once the message is in.
        let (new, name_registered, _) = self.prepare_start(start, false).await?;
        validate_message(
            self.core.config.max_payload_bytes,
            "workflow_id",
            &new.workflow_id,
            &message.topic,
            &message.message,
        )?;
        validate::optional_name("idempotency_key", &message.idempotency_key)?;
        let topic = message.topic.clone();
        let m = NewMessage {
            message_id: uuid::Uuid::now_v7().to_string(),
            workflow_id: new.workflow_id.clone(),
            topic: message.topic,
            payload: message.message,
            idempotency_key: (!message.idempotency_key.is_empty()).then_some(message.idempotency_key),
            max_unread: self.core.config.max_unread_messages,
        };
        let (started, sent) = self.core.store.start_and_send(new, m, self.core.now()).await?;
        self.core.counters.start(&started, name_registered);
        if !sent.duplicate {
            self.messaging
                .wake_receiver(&started.workflow.workflow_id, &topic)
                .await;
        }
        // The new workflow is in its queue (only the workers that serve it claim), or the message
        // took a receiver off its park, into a queue not known here.
        if !started.created {
            self.core.work_enqueued();
        } else if started.workflow.status == waymark_store::WorkflowStatus::Enqueued {
            self.core.workflow_enqueued(&started.workflow);
        }
        Ok((started, name_registered, sent))
    }
}
