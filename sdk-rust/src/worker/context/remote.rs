//! Remote steps and waiting for several things: a workflow calls a step by name and any worker
//! that registered it runs it — in this process, another one, or another language; the result
//! is recorded as this workflow's step, so a replay (even after this worker died) finds it.

use std::{future::Future, time::Duration};

use serde::{de::DeserializeOwned, Serialize};
use waymark_journal::{select::WaitFor, shapes};
use waymark_proto::v1::{self, reply, worker_message};

use super::{recorded, refused, replay, unix_ms, Inner, WorkflowContext};
use crate::{RetryPolicy, WorkflowError};

/// How a remote step is retried and timed. Unset fields take the server's defaults: three
/// attempts, 1 s doubling up to 60 s between them, five minutes per attempt.
#[derive(Debug, Clone, Default)]
pub struct StepOptions {
    pub retry: Option<RetryPolicy>,
    /// Start-to-close timeout of one attempt.
    pub timeout: Option<Duration>,
}

impl StepOptions {
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// A remote step that was called and may still be running. Await its result with
/// [`WorkflowContext::step_result`], or wait on it with others.
#[derive(Debug, Clone)]
pub struct StepHandle {
    step_id: u32,
    name: String,
    input: v1::Payload,
    options: StepOptions,
    /// The `call` span, when this run made the call (not when it replayed it).
    span: Option<opentelemetry::Context>,
}

/// Something a workflow can wait for alongside others: a child (or any) workflow finishing, or
/// a remote step's result.
#[derive(Debug, Clone)]
pub enum Awaitable {
    Workflow(String),
    Step(StepHandle),
}

impl From<StepHandle> for Awaitable {
    fn from(h: StepHandle) -> Self {
        Awaitable::Step(h)
    }
}

impl From<&StepHandle> for Awaitable {
    fn from(h: &StepHandle) -> Self {
        Awaitable::Step(h.clone())
    }
}

fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs().min(i64::MAX as u64) as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

impl Inner {
    /// Makes the call (or asks again for its result).
    async fn call(&self, h: &StepHandle) -> Result<v1::CallResult, WorkflowError> {
        let req = v1::CallStep {
            workflow_id: self.workflow_id.clone(),
            epoch: self.epoch,
            step_id: h.step_id,
            step_name: h.name.clone(),
            input: Some(h.input.clone()),
            retry: h.options.retry.as_ref().map(|r| v1::RetryPolicy {
                max_attempts: r.max_attempts,
                initial_interval: Some(duration(r.initial_interval)),
                backoff_coefficient: r.backoff,
                max_interval: Some(duration(r.max_interval)),
            }),
            timeout: h.options.timeout.map(duration),
            trace_context: h.span.as_ref().and_then(crate::tracing_ctx::wire),
        };
        match self.request(worker_message::Kind::CallStep(req)).await? {
            reply::Result::CallResult(r) => Ok(r),
            reply::Result::Error(e) => Err(refused(e)),
            _ => Err(WorkflowError::Disconnected),
        }
    }

    /// Asks the server to decide a wait over several targets, waiting for wakeups until it does.
    async fn select(&self, step_id: u32, targets: &[Awaitable], all: bool) -> Result<u32, WorkflowError> {
        let targets: Vec<v1::WaitTarget> = targets
            .iter()
            .map(|t| v1::WaitTarget {
                target: Some(match t {
                    Awaitable::Workflow(id) => v1::wait_target::Target::WorkflowId(id.clone()),
                    Awaitable::Step(h) => v1::wait_target::Target::StepId(h.step_id),
                }),
            })
            .collect();
        loop {
            self.check_cancelled()?;
            let req = v1::Select {
                workflow_id: self.workflow_id.clone(),
                epoch: self.epoch,
                step_id,
                targets: targets.clone(),
                all,
            };
            let r = match self.request(worker_message::Kind::Select(req)).await? {
                reply::Result::Selected(r) => r,
                reply::Result::Error(e) => return Err(refused(e)),
                _ => return Err(WorkflowError::Disconnected),
            };
            if r.outcome == v1::recv_result::Outcome::Delivered as i32 {
                return Ok(r.index);
            }
            self.wait_until(i64::MAX, 0).await?;
        }
    }
}

impl WorkflowContext {
    /// Calls remote step `name` and waits for its result. Any worker that registered the step
    /// runs it; the server retries it per `options` and records the result, so a replay — even
    /// on another worker after this one died — gets the same result without calling again.
    pub fn call_step<I: Serialize, O: DeserializeOwned>(
        &self,
        name: &str,
        input: &I,
        options: StepOptions,
    ) -> impl Future<Output = Result<O, WorkflowError>> + Send {
        let started = self.start_step(name, input, options);
        let ctx = self.clone();
        async move {
            let handle = started.await?;
            ctx.step_result(&handle).await
        }
    }

    /// Calls remote step `name` without waiting for it: the call is durable when this returns.
    /// Wait with [`step_result`](Self::step_result), [`wait_first`](Self::wait_first) or
    /// [`wait_all`](Self::wait_all).
    pub fn start_step<I: Serialize>(
        &self,
        name: &str,
        input: &I,
        options: StepOptions,
    ) -> impl Future<Output = Result<StepHandle, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        let name = name.to_string();
        let input = serde_json::to_value(input);
        async move {
            let mut handle = StepHandle {
                step_id,
                name,
                input: inner.conn.limits.payload("the remote step's input", &input?)?,
                options,
                span: None,
            };
            // Recorded: called before, and its result (when it has one) is read by step_result.
            if inner.history.at(step_id, &handle.name)?.is_some() {
                return Ok(handle);
            }
            inner.check_cancelled()?;
            handle.span = Some(crate::tracing_ctx::open(
                format!("call {}", handle.name),
                opentelemetry::trace::SpanKind::Client,
                &inner.otel,
                crate::tracing_ctx::step_attributes(&inner.workflow_id, step_id, &handle.name),
            ));
            inner.call(&handle).await?;
            Ok(handle)
        }
    }

    /// The result of a remote step called with [`start_step`](Self::start_step), waiting for
    /// it. A workflow that has waited longer than its worker's park threshold is parked until
    /// the result is recorded.
    pub fn step_result<O: DeserializeOwned>(
        &self,
        handle: &StepHandle,
    ) -> impl Future<Output = Result<O, WorkflowError>> + Send {
        let (inner, h) = (self.inner.clone(), handle.clone());
        async move {
            if let Some(rec) = inner.history.at(h.step_id, &h.name)? {
                return replay(rec, &h.name);
            }
            let waiting_since = unix_ms();
            loop {
                inner.check_cancelled()?;
                let r = inner.call(&h).await?;
                if r.outcome == v1::recv_result::Outcome::Delivered as i32 {
                    if let Some(span) = &h.span {
                        crate::tracing_ctx::end(span, r.failure.as_ref().map(|f| f.message.clone()));
                    }
                    let rec = v1::Step {
                        step_id: h.step_id,
                        name: h.name.clone(),
                        output: r.output,
                        failure: r.failure,
                        ..Default::default()
                    };
                    return replay(&recorded(&rec), &h.name);
                }
                let park_at = inner
                    .park_after
                    .map(|t| waiting_since.saturating_add(t.as_millis() as i64));
                match park_at {
                    Some(at) if unix_ms() >= at => {
                        if inner.park(h.step_id, i64::MAX, v1::park::On::Step(h.step_id)).await? {
                            return Err(WorkflowError::Parked);
                        }
                    }
                    Some(at) => inner.wait_until(at, unix_ms()).await?,
                    None => inner.wait_until(i64::MAX, 0).await?,
                }
            }
        }
    }

    /// Waits until the first of `targets` finishes and returns its index. The winner is
    /// recorded, so a replay takes the same branch even if others have finished since. Read the
    /// winner's result with [`step_result`](Self::step_result) or
    /// [`await_child`](Self::await_child).
    pub fn wait_first(&self, targets: &[Awaitable]) -> impl Future<Output = Result<usize, WorkflowError>> + Send {
        self.wait_several(targets, false)
    }

    /// Waits until every one of `targets` has finished. Recorded like
    /// [`wait_first`](Self::wait_first).
    pub fn wait_all(&self, targets: &[Awaitable]) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let wait = self.wait_several(targets, true);
        async move { wait.await.map(drop) }
    }

    fn wait_several(
        &self,
        targets: &[Awaitable],
        all: bool,
    ) -> impl Future<Output = Result<usize, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let (inner, targets) = (self.inner.clone(), targets.to_vec());
        async move {
            let mode = if all { WaitFor::All } else { WaitFor::First };
            if let Some(s) = inner.builtin::<shapes::Selected>(step_id, mode.step_name())? {
                return Ok(s.index as usize);
            }
            if targets.is_empty() {
                return Err(WorkflowError::failed("InvalidArgument", "nothing to wait for"));
            }
            let _span = inner.wait_span("select", step_id, None);
            Ok(inner.select(step_id, &targets, all).await? as usize)
        }
    }
}
