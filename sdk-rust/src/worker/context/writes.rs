//! Writes a workflow makes as steps: messages to other workflows, its events, its streams.
//! Each is recorded by the server with the write, so a replay does not write again.

use std::future::Future;

use serde::Serialize;
use waymark_journal::{names, shapes};
use waymark_proto::v1::{self, reply, worker_message};

use super::{refused, WorkflowContext};
use crate::WorkflowError;

impl WorkflowContext {
    /// Sends `message` to workflow `destination` on `topic` ("" is the default topic). Recorded
    /// as a step: a replay does not send again. Returns the message id.
    pub fn send<M: Serialize>(
        &self,
        destination: &str,
        topic: &str,
        message: &M,
    ) -> impl Future<Output = Result<String, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        let (destination, topic) = (destination.to_string(), topic.to_string());
        let message = serde_json::to_value(message);
        async move {
            if let Some(sent) = inner.builtin::<shapes::Sent>(step_id, names::SEND)? {
                return Ok(sent.message_id);
            }
            inner.check_cancelled()?;
            let req = v1::SendMessageStep {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                destination_id: destination,
                topic,
                message: Some(inner.conn.limits.payload("the message", &message?)?),
            };
            match inner.request(worker_message::Kind::SendMessage(req)).await? {
                reply::Result::MessageSent(m) => Ok(m.message_id),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }

    /// Sets this workflow's event `key` to `value`. The current value, its history and the step
    /// are written in one transaction; clients and other workflows waiting on it are woken.
    pub fn set_event<V: Serialize>(
        &self,
        key: &str,
        value: &V,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let (inner, key) = (self.inner.clone(), key.to_string());
        let value = serde_json::to_value(value);
        async move {
            if inner.builtin::<shapes::EventSet>(step_id, names::SET_EVENT)?.is_some() {
                return Ok(());
            }
            inner.check_cancelled()?;
            let req = v1::SetEvent {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                key,
                value: Some(inner.conn.limits.payload("the event's value", &value?)?),
            };
            match inner.request(worker_message::Kind::SetEvent(req)).await? {
                reply::Result::StepRecorded(_) => Ok(()),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }
}

impl WorkflowContext {
    /// Appends `value` to this workflow's stream `key`; returns its offset. Recorded as a step,
    /// so a replay does not append again. Readers following the stream get it at once.
    pub fn write_stream<V: Serialize>(
        &self,
        key: &str,
        value: &V,
    ) -> impl Future<Output = Result<u64, WorkflowError>> + Send {
        let value = serde_json::to_value(value).map(Some);
        self.stream_step(key, value, names::WRITE_STREAM)
    }

    /// Closes this workflow's stream `key`: readers end after the values written before it.
    pub fn close_stream(&self, key: &str) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step = self.stream_step(key, Ok(None), names::CLOSE_STREAM);
        async move { step.await.map(drop) }
    }

    fn stream_step(
        &self,
        key: &str,
        value: Result<Option<serde_json::Value>, serde_json::Error>,
        name: &'static str,
    ) -> impl Future<Output = Result<u64, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let (inner, key) = (self.inner.clone(), key.to_string());
        async move {
            if let Some(w) = inner.builtin::<shapes::StreamWritten>(step_id, name)? {
                return Ok(w.offset);
            }
            inner.check_cancelled()?;
            let value = match value? {
                Some(v) => Some(inner.conn.limits.payload("the stream value", &v)?),
                None => None,
            };
            let req = v1::WriteStream {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                key,
                close: value.is_none(),
                value,
            };
            match inner.request(worker_message::Kind::WriteStream(req)).await? {
                reply::Result::StreamWritten(w) => Ok(w.offset),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }
}
