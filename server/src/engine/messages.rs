//! Messages: sends from clients and from workflows, and receives that wait.
//!
//! A receive that finds nothing registers a wait here — (workflow, topic) → the worker stream
//! and step waiting — *before* it looks, so a send that lands between the look and the wait
//! still finds it. A send through this replica wakes the waiter at once; sends through other
//! replicas are found by the poller (`waits/poller.rs`), one query per interval for all waits of this replica.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
};

use waymark_store::{Fence, MessageRecord, Millis, NewMessage, RecvWaiter, Sent};

use super::{messaging::Messaging, validate, EngineError, EngineResult, ToWorker, WorkerSession};

#[derive(Debug, Clone, Default)]
pub struct SendRequest {
    pub workflow_id: String,
    pub topic: String,
    /// JSON text.
    pub message: String,
    pub idempotency_key: String,
}

struct Waiter {
    session: Weak<WorkerSession>,
    step_id: u32,
    /// The waiting run's fence and deadline, so a send through this replica can complete the
    /// receive in its own transaction.
    epoch: u64,
    deadline: Millis,
}

/// Receives waiting on this replica, by (workflow, topic).
#[derive(Default)]
pub struct RecvWaits {
    by_key: Mutex<HashMap<(String, String), Waiter>>,
}

impl RecvWaits {
    pub(crate) fn register(
        &self,
        fence: &Fence,
        topic: &str,
        session: &Arc<WorkerSession>,
        step_id: u32,
        deadline: Millis,
    ) {
        let workflow_id = &fence.workflow_id;
        let waiter = Waiter {
            session: Arc::downgrade(session),
            step_id,
            epoch: fence.epoch,
            deadline,
        };
        self.by_key
            .lock()
            .unwrap()
            .insert((workflow_id.to_string(), topic.to_string()), waiter);
    }

    pub(crate) fn forget(&self, workflow_id: &str, topic: &str, step_id: u32) {
        let mut map = self.by_key.lock().unwrap();
        let key = (workflow_id.to_string(), topic.to_string());
        if map.get(&key).is_some_and(|w| w.step_id == step_id) {
            map.remove(&key);
        }
    }

    /// The receive waiting here for (workflow, topic), if its worker is still attached.
    fn peek(&self, workflow_id: &str, topic: &str) -> Option<RecvWaiter> {
        let map = self.by_key.lock().unwrap();
        let w = map.get(&(workflow_id.to_string(), topic.to_string()))?;
        (w.session.strong_count() > 0).then(|| RecvWaiter {
            fence: Fence {
                workflow_id: workflow_id.to_string(),
                epoch: w.epoch,
            },
            step_id: w.step_id,
            deadline: w.deadline,
        })
    }

    fn take(&self, workflow_id: &str, topic: &str) -> Option<(Arc<WorkerSession>, u32)> {
        let w = self
            .by_key
            .lock()
            .unwrap()
            .remove(&(workflow_id.to_string(), topic.to_string()))?;
        Some((w.session.upgrade()?, w.step_id))
    }

    /// The topic the workflow's receive waits on here, and until when.
    pub(crate) fn waited_by(&self, workflow_id: &str) -> Option<(String, Millis)> {
        let map = self.by_key.lock().unwrap();
        map.iter()
            .find(|((w, _), waiter)| w == workflow_id && waiter.session.strong_count() > 0)
            .map(|((_, topic), waiter)| (topic.clone(), waiter.deadline))
    }

    /// The keys a receive still waits on, dropping those whose stream no longer holds the
    /// workflow at the waiting epoch (it parked, finished, moved on or went away).
    pub(crate) fn keys(&self) -> Vec<(String, String)> {
        let mut map = self.by_key.lock().unwrap();
        map.retain(|(workflow_id, _), w| w.session.upgrade().is_some_and(|s| s.holds(workflow_id, w.epoch)));
        map.keys().cloned().collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.lock().unwrap().len()
    }
}

pub(crate) fn validate_message(
    max_payload: usize,
    workflow_field: &str,
    workflow_id: &str,
    topic: &str,
    message: &str,
) -> EngineResult<()> {
    validate::name(workflow_field, workflow_id)?;
    validate::optional_name("topic", topic)?;
    // Only UpdateWorkflow sends there: a message that is not an update a workflow could answer
    // would fail the workflow that takes it as one.
    if topic.starts_with(super::updates::PREFIX) {
        return Err(EngineError::invalid(format!(
            "topics beginning {:?} carry updates: send one with UpdateWorkflow",
            super::updates::PREFIX
        )));
    }
    validate::payload("message", message, max_payload)
}

impl Messaging {
    /// Sends from outside any workflow.
    pub async fn send_message(&self, req: SendRequest) -> EngineResult<Sent> {
        validate_message(
            self.core.config.max_payload_bytes,
            "workflow_id",
            &req.workflow_id,
            &req.topic,
            &req.message,
        )?;
        validate::optional_name("idempotency_key", &req.idempotency_key)?;
        self.deliver(req).await
    }

    /// Sends a checked message from outside any workflow (an update's, too).
    pub(crate) async fn deliver(&self, req: SendRequest) -> EngineResult<Sent> {
        let message = NewMessage {
            message_id: uuid::Uuid::now_v7().to_string(),
            workflow_id: req.workflow_id,
            topic: req.topic,
            payload: req.message,
            idempotency_key: (!req.idempotency_key.is_empty()).then_some(req.idempotency_key),
            max_unread: self.core.config.max_unread_messages,
        };
        let (to, topic) = (message.workflow_id.clone(), message.topic.clone());
        // A receive waiting here is completed in the send's own transaction, and its worker gets
        // the message with the wakeup: one commit and one push between a send and the receive.
        if let Some(waiter) = self.waits.recv.peek(&to, &topic) {
            let (sent, delivered) = self
                .core
                .store
                .send_message_delivering(message, &waiter, self.core.now())
                .await?;
            match delivered {
                Some(message) => {
                    if let Some((session, step_id)) = self.waits.recv.take(&to, &topic) {
                        session.grow_history(&to, message.len());
                        let delivery = ToWorker::Delivered {
                            workflow_id: to.clone(),
                            step_id,
                            message,
                        };
                        session.send(delivery).await;
                        self.core.counters.wakeup("message");
                    }
                }
                None => {
                    self.wake_receiver(&to, &topic).await;
                    // The receiver may have been parked: it is back in its queue now.
                    self.core.work_enqueued();
                }
            }
            return Ok(sent);
        }
        let sent = self.core.store.send_message(message, self.core.now()).await?;
        self.wake_receiver(&to, &topic).await;
        // The receiver may have been parked: it is back in its queue now.
        self.core.work_enqueued();
        Ok(sent)
    }

    pub async fn list_messages(&self, workflow_id: &str) -> EngineResult<Vec<MessageRecord>> {
        validate::name("workflow_id", workflow_id)?;
        Ok(self.core.store.list_messages(workflow_id).await?)
    }

    pub(crate) async fn wake_receiver(&self, workflow_id: &str, topic: &str) {
        if let Some((session, step_id)) = self.waits.recv.take(workflow_id, topic) {
            session
                .send(ToWorker::Wakeup {
                    workflow_id: workflow_id.to_string(),
                    step_id,
                })
                .await;
            self.core.counters.wakeup("message");
        }
    }
}
