//! Durable waits: a sleep, and receives and event reads that wait up to a timeout. Each
//! records when it ends before it starts, so a workflow recovered mid-wait waits only what is
//! left, and the server records what a wait got.

use std::{future::Future, time::Duration};

use serde::de::DeserializeOwned;
use waymark_journal::{
    names,
    shapes::{self, WaitKind, Waited},
};
use waymark_proto::{
    json,
    v1::{self, reply, worker_message},
};

use super::{refused, shape_payload, unix_ms, Inner, WorkflowContext};
use crate::WorkflowError;

impl WorkflowContext {
    /// Sleeps durably: the wake time is recorded as a step, so a workflow recovered mid-sleep
    /// sleeps only what is left. Cancelling the workflow ends the sleep.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        async move {
            let wake_at = match inner.builtin::<shapes::Sleep>(step_id, names::SLEEP)? {
                Some(s) => s.wake_at_ms,
                None => {
                    inner.check_cancelled()?;
                    let wake_at = unix_ms().saturating_add(duration.as_millis().min(i64::MAX as u128) as i64);
                    inner
                        .record(
                            step_id,
                            names::SLEEP,
                            shape_payload(&shapes::Sleep { wake_at_ms: wake_at }),
                            1,
                        )
                        .await?;
                    wake_at
                }
            };
            // Waiting now (a replay of a sleep already over does not).
            let _span = (unix_ms() < wake_at).then(|| inner.wait_span("sleep", step_id, None));
            if inner.should_park(wake_at, unix_ms()) && inner.park(step_id, wake_at, v1::park::On::Timer(true)).await? {
                return Err(WorkflowError::Parked);
            }
            while unix_ms() < wake_at {
                // A replay of a sleep still running ends where the live run sleeps.
                inner.live(step_id)?;
                inner.wait_until(wake_at, unix_ms()).await?;
            }
            Ok(())
        }
    }
    /// Takes the oldest message sent to this workflow on `topic` ("" is the default topic),
    /// waiting up to `timeout` for one; `None` when none came. The deadline is recorded first, so
    /// a recovered workflow keeps its original timeout, and the message is consumed and recorded
    /// in one transaction, so it is received exactly once. The server wakes the wait when a
    /// message arrives; nothing polls.
    pub fn recv<T: DeserializeOwned>(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send {
        let steps = (self.inner.history.take(2), shapes::RECV);
        let (inner, topic) = (self.inner.clone(), topic.to_string());
        async move {
            let request = |step_id, deadline_ms| {
                worker_message::Kind::Recv(v1::Recv {
                    workflow_id: inner.workflow_id.clone(),
                    epoch: inner.epoch,
                    step_id,
                    topic: topic.clone(),
                    deadline_ms,
                })
            };
            let park_on = v1::park::On::Topic(topic.clone());
            let span = ("recv", ("waymark.wait.topic", topic.clone()));
            let got = inner.durable_wait(steps, timeout, park_on, span, request).await?;
            got.map(|m| serde_json::from_value(m).map_err(WorkflowError::from))
                .transpose()
        }
    }
    /// Reads workflow `workflow_id`'s event `key`, waiting up to `timeout` for it to be set;
    /// `None` when it was not. Recorded, with its deadline, like [`recv`](Self::recv).
    pub fn get_event<T: DeserializeOwned>(
        &self,
        workflow_id: &str,
        key: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send {
        let steps = (self.inner.history.take(2), shapes::GET_EVENT);
        let (inner, target, key) = (self.inner.clone(), workflow_id.to_string(), key.to_string());
        async move {
            let request = |step_id, deadline_ms| {
                worker_message::Kind::GetEvent(v1::GetEventStep {
                    workflow_id: inner.workflow_id.clone(),
                    epoch: inner.epoch,
                    step_id,
                    target_workflow_id: target.clone(),
                    key: key.clone(),
                    deadline_ms,
                })
            };
            let park_on = v1::park::On::Event(v1::EventKey {
                workflow_id: target.clone(),
                key: key.clone(),
            });
            let span = ("event", ("waymark.wait.key", key.clone()));
            let got = inner.durable_wait(steps, timeout, park_on, span, request).await?;
            got.map(|v| serde_json::from_value(v).map_err(WorkflowError::from))
                .transpose()
        }
    }
}

impl Inner {
    /// A wait that takes two step positions: the deadline (recorded first, so a recovery keeps
    /// it) and the outcome, which the server records. Asks the server, and on WAITING waits for
    /// its wakeup or the deadline, then asks again.
    async fn durable_wait(
        &self,
        (deadline_step, kind): (u32, WaitKind),
        timeout: Duration,
        park_on: v1::park::On,
        (span_kind, detail): (&str, (&'static str, String)),
        request: impl Fn(u32, i64) -> worker_message::Kind,
    ) -> Result<Option<serde_json::Value>, WorkflowError> {
        let result_step = deadline_step + 1;
        let deadline_ms = match self.builtin::<shapes::Deadline>(deadline_step, kind.deadline_step)? {
            Some(d) => d.deadline_ms,
            None => {
                self.check_cancelled()?;
                let deadline = unix_ms().saturating_add(timeout.as_millis().min(i64::MAX as u128) as i64);
                self.record(
                    deadline_step,
                    kind.deadline_step,
                    shape_payload(&shapes::Deadline { deadline_ms: deadline }),
                    1,
                )
                .await?;
                deadline
            }
        };
        match self.history.waited(&kind, result_step)? {
            Some(Waited::TimedOut) => return Ok(None),
            Some(Waited::Delivered(v)) => return Ok(Some(v)),
            None => {}
        }
        let _span = self.wait_span(span_kind, deadline_step, Some(detail));
        loop {
            self.check_cancelled()?;
            // The server may have completed the wait itself and sent the answer with the wakeup.
            if let Some(p) = self.delivered.lock().unwrap().remove(&result_step) {
                return Ok(Some(
                    json::from_payload(Some(&p)).map_err(|e| WorkflowError::Serialization(e.to_string()))?,
                ));
            }
            let (outcome, value, server_now) = match self.request(request(result_step, deadline_ms)).await? {
                reply::Result::RecvResult(r) => (r.outcome, r.message, r.server_now_ms),
                reply::Result::EventResult(r) => (r.outcome, r.value, r.server_now_ms),
                reply::Result::Error(e) => return Err(refused(e)),
                _ => return Err(WorkflowError::Disconnected),
            };
            use v1::recv_result::Outcome as O;
            match O::try_from(outcome).unwrap_or(O::Unspecified) {
                O::Delivered => {
                    return Ok(Some(
                        json::from_payload(value.as_ref()).map_err(|e| WorkflowError::Serialization(e.to_string()))?,
                    ))
                }
                O::TimedOut => return Ok(None),
                // Wait for a wakeup, or until the deadline by the server's clock.
                _ if self.should_park(deadline_ms, server_now) => {
                    if self.park(result_step, deadline_ms, park_on.clone()).await? {
                        return Err(WorkflowError::Parked);
                    }
                }
                _ => self.wait_until(deadline_ms, server_now).await?,
            }
        }
    }
}
