//! `waymark.v1.WorkflowService`: thin adapter from the wire to [`Engine`]'s client API.

use std::{sync::Arc, time::Duration};

use tonic::{Request, Response, Status};
use waymark_proto::v1::{self, workflow_service_server::WorkflowService};

use super::{
    convert,
    observe::{note_workflow, note_workflow_id, IncomingTrace},
    status::to_status,
};
use crate::engine::{
    messages::SendRequest,
    start_and_send::Message,
    streams::StreamNext,
    updates::UpdateRequest,
    workflows::{ListRequest, StartRequest},
};
use crate::namespaces::Namespaces;

pub struct WorkflowApi {
    pub namespaces: Arc<Namespaces>,
}

/// The caller's deadline, from the `grpc-timeout` header ("<digits><unit>", unit one of
/// H M S m u n).
pub fn grpc_timeout<T>(req: &Request<T>) -> Option<Duration> {
    let raw = req.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = raw.split_at(raw.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[tonic::async_trait]
impl WorkflowService for WorkflowApi {
    type ReadStreamStream =
        std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<v1::ReadStreamResponse, Status>> + Send>>;

    async fn read_stream(
        &self,
        req: Request<v1::ReadStreamRequest>,
    ) -> Result<Response<Self::ReadStreamStream>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let watch = req.extensions().get::<crate::auth::KeyWatch>().cloned();
        let r = req.into_inner();
        // Answer NOT_FOUND / INVALID_ARGUMENT up front rather than as a broken stream.
        let place = engine
            .messaging()
            .open_stream_reader(&r.workflow_id, &r.key)
            .await
            .map_err(to_status)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let engine = engine.clone();
        tokio::spawn(async move {
            let _place = place;
            let mut from = r.from_offset;
            // One watch for the whole read, however often entries come.
            let revoked = async move {
                match watch {
                    Some(w) => w.revoked().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(revoked);
            loop {
                let next = tokio::select! {
                    n = engine.messaging().next_stream_entries(&r.workflow_id, &r.key, from) => n,
                    // The reader went away.
                    _ = tx.closed() => return,
                    // Its key was revoked: a follower may otherwise read on for hours.
                    _ = &mut revoked => {
                        let _ = tx.send(Err(to_status(crate::auth::unauthenticated()))).await;
                        return;
                    }
                };
                match next {
                    Ok(StreamNext::Entries(entries)) => {
                        for e in entries {
                            if e.closed {
                                return;
                            }
                            from = e.offset + 1;
                            let item = v1::ReadStreamResponse {
                                offset: e.offset,
                                value: e.value.as_deref().and_then(convert::payload),
                            };
                            if tx.send(Ok(item)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Ok(StreamNext::End) => return,
                    Err(e) => {
                        let _ = tx.send(Err(to_status(e))).await;
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn start_workflow(
        &self,
        req: Request<v1::StartWorkflowRequest>,
    ) -> Result<Response<v1::StartWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        // The namespace's own rate of starts, before anything is read or written.
        engine.core.quota.take_start(engine.namespace()).map_err(to_status)?;
        let trace = crate::telemetry::context::for_work(IncomingTrace::of(&req));
        let started = engine
            .workflows()
            .start_workflow_reporting(start_request(req.into_inner(), trace)?)
            .await
            .map_err(to_status)?;
        let (started, name_registered) = started;
        note_workflow(&started.workflow);
        Ok(Response::new(v1::StartWorkflowResponse {
            workflow: Some(convert::workflow(started.workflow)),
            created: started.created,
            name_registered,
        }))
    }

    async fn get_workflow(
        &self,
        req: Request<v1::GetWorkflowRequest>,
    ) -> Result<Response<v1::GetWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let w = engine
            .workflows()
            .get_workflow(&req.into_inner().workflow_id)
            .await
            .map_err(to_status)?;
        note_workflow(&w);
        let waiting_on = engine.workflows().waiting_on(&w).await.map_err(to_status)?;
        Ok(Response::new(v1::GetWorkflowResponse {
            workflow: Some(v1::Workflow {
                waiting_on: waiting_on.map(convert::waiting_on),
                ..convert::workflow(w)
            }),
        }))
    }

    async fn list_workflows(
        &self,
        req: Request<v1::ListWorkflowsRequest>,
    ) -> Result<Response<v1::ListWorkflowsResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let statuses = convert::statuses_from_wire(&r.statuses)?;
        let page = engine
            .workflows()
            .list_workflows(ListRequest {
                statuses,
                workflow_name: r.workflow_name,
                queue_name: r.queue_name,
                created_at_or_after: r.created_after.as_ref().map(convert::millis),
                created_before: r.created_before.as_ref().map(convert::millis),
                worker_id: r.worker_id,
                app_version: r.app_version,
                parent_workflow_id: r.parent_workflow_id,
                page_size: r.page_size,
                page_token: r.page_token,
                include_total: r.include_total,
                tags: r.tags.into_iter().collect(),
                workflow_id_prefix: r.workflow_id_prefix,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListWorkflowsResponse {
            workflows: page.workflows.into_iter().map(convert::workflow).collect(),
            next_page_token: page.next_page_token,
            total: page.total,
        }))
    }

    async fn await_workflow(
        &self,
        req: Request<v1::AwaitWorkflowRequest>,
    ) -> Result<Response<v1::AwaitWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        // Answer a little before the caller gives up, so it gets our reason rather than a bare
        // deadline error from its own side.
        let timeout = grpc_timeout(&req).map(|t| t.saturating_sub(t.min(Duration::from_millis(50)) / 2));
        let w = engine
            .workflows()
            .await_workflow(&req.into_inner().workflow_id, timeout)
            .await
            .map_err(to_status)?;
        note_workflow(&w);
        Ok(Response::new(v1::AwaitWorkflowResponse {
            workflow: Some(convert::workflow(w)),
        }))
    }

    async fn list_steps(&self, req: Request<v1::ListStepsRequest>) -> Result<Response<v1::ListStepsResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let page = engine
            .steps_page(&r.workflow_id, &page_request(r.page_size, r.page_token))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListStepsResponse {
            steps: page.items.into_iter().map(convert::step).collect(),
            next_page_token: page.next_token,
        }))
    }

    async fn cancel_workflow(
        &self,
        req: Request<v1::CancelWorkflowRequest>,
    ) -> Result<Response<v1::CancelWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let w = engine
            .workflows()
            .cancel_tree(&r.workflow_id, r.cascade)
            .await
            .map_err(to_status)?;
        note_workflow(&w);
        Ok(Response::new(v1::CancelWorkflowResponse {
            workflow: Some(convert::workflow(w)),
        }))
    }

    async fn delete_workflow(
        &self,
        req: Request<v1::DeleteWorkflowRequest>,
    ) -> Result<Response<v1::DeleteWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        super::workflow_lifecycle::delete(&engine, req.into_inner()).await
    }

    async fn fork_workflow(
        &self,
        req: Request<v1::ForkWorkflowRequest>,
    ) -> Result<Response<v1::ForkWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        super::workflow_lifecycle::fork(&engine, req.into_inner()).await
    }

    async fn set_workflow_version(
        &self,
        req: Request<v1::SetWorkflowVersionRequest>,
    ) -> Result<Response<v1::SetWorkflowVersionResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        super::workflow_lifecycle::set_version(&engine, req.into_inner()).await
    }

    async fn bulk_workflows(
        &self,
        req: Request<v1::BulkWorkflowsRequest>,
    ) -> Result<Response<v1::BulkWorkflowsResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        super::workflow_lifecycle::bulk(&engine, req.into_inner()).await
    }

    async fn delay_workflow(
        &self,
        req: Request<v1::DelayWorkflowRequest>,
    ) -> Result<Response<v1::DelayWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let delay = convert::duration_ms("delay", r.delay.as_ref())?.unwrap_or(0);
        let w = engine
            .workflows()
            .delay_workflow(&r.workflow_id, delay)
            .await
            .map_err(to_status)?;
        note_workflow(&w);
        Ok(Response::new(v1::DelayWorkflowResponse {
            workflow: Some(convert::workflow(w)),
        }))
    }

    async fn send_message(
        &self,
        req: Request<v1::SendMessageRequest>,
    ) -> Result<Response<v1::SendMessageResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let message = convert::payload_text("message", r.message.as_ref())?;
        let sent = engine
            .messaging()
            .send_message(SendRequest {
                workflow_id: r.workflow_id,
                topic: r.topic,
                message,
                idempotency_key: r.idempotency_key,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::SendMessageResponse {
            message_id: sent.message_id,
            duplicate: sent.duplicate,
        }))
    }

    async fn start_and_send(
        &self,
        req: Request<v1::StartAndSendRequest>,
    ) -> Result<Response<v1::StartAndSendResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        // A start like any other against the namespace's rate of starts.
        engine.core.quota.take_start(engine.namespace()).map_err(to_status)?;
        let trace = crate::telemetry::context::for_work(IncomingTrace::of(&req));
        let r = req.into_inner();
        let start = r
            .start
            .ok_or_else(|| Status::invalid_argument("start is required: the workflow to start"))?;
        let message = Message {
            topic: r.topic,
            message: convert::payload_text("message", r.message.as_ref())?,
            idempotency_key: r.idempotency_key,
        };
        let (started, name_registered, sent) = engine
            .workflows()
            .start_and_send(start_request(start, trace)?, message)
            .await
            .map_err(to_status)?;
        note_workflow(&started.workflow);
        Ok(Response::new(v1::StartAndSendResponse {
            workflow: Some(convert::workflow(started.workflow)),
            created: started.created,
            name_registered,
            message_id: sent.message_id,
            duplicate: sent.duplicate,
        }))
    }

    async fn update_workflow(
        &self,
        req: Request<v1::UpdateWorkflowRequest>,
    ) -> Result<Response<v1::UpdateWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let timeout = match convert::duration_ms("timeout", r.timeout.as_ref())? {
            Some(ms) if ms <= 0 => return Err(Status::invalid_argument("timeout must be more than zero")),
            ms => ms.map(|ms| Duration::from_millis(ms as u64)),
        };
        let (update_id, result) = engine
            .workflows()
            .update_workflow(UpdateRequest {
                workflow_id: r.workflow_id,
                name: r.name,
                args: convert::payload_text("args", r.args.as_ref())?,
                update_id: r.update_id,
                timeout,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::UpdateWorkflowResponse {
            update_id,
            result: convert::payload(&result),
        }))
    }

    async fn list_messages(
        &self,
        req: Request<v1::ListMessagesRequest>,
    ) -> Result<Response<v1::ListMessagesResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let page = engine
            .messages_page(&r.workflow_id, &page_request(r.page_size, r.page_token))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListMessagesResponse {
            messages: page.items.into_iter().map(convert::message).collect(),
            next_page_token: page.next_token,
        }))
    }

    async fn get_event(&self, req: Request<v1::GetEventRequest>) -> Result<Response<v1::GetEventResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let deadline = grpc_timeout(&req);
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let mut timeout = match r.timeout {
            None => Duration::ZERO,
            Some(d) if d.seconds < 0 || d.nanos < 0 => {
                return Err(super::status::invalid("timeout must not be negative"))
            }
            Some(d) => Duration::new(d.seconds as u64, d.nanos as u32),
        };
        if let Some(d) = deadline {
            // Answer "not found" before the caller's own deadline cuts the call off.
            timeout = timeout.min(d.saturating_sub(d.min(Duration::from_millis(50)) / 2));
        }
        let value = engine
            .messaging()
            .get_event(&r.workflow_id, &r.key, timeout)
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::GetEventResponse {
            found: value.is_some(),
            value: value.and_then(|v| convert::payload(&v)),
        }))
    }

    async fn list_events(
        &self,
        req: Request<v1::ListEventsRequest>,
    ) -> Result<Response<v1::ListEventsResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let page = engine
            .events_page(&r.workflow_id, &page_request(r.page_size, r.page_token))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListEventsResponse {
            events: page.items.into_iter().map(convert::event).collect(),
            next_page_token: page.next_token,
        }))
    }

    async fn list_streams(
        &self,
        req: Request<v1::ListStreamsRequest>,
    ) -> Result<Response<v1::ListStreamsResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        note_workflow_id(&r.workflow_id);
        let streams = engine
            .messaging()
            .list_streams(&r.workflow_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::ListStreamsResponse {
            streams: streams
                .into_iter()
                .map(|s| v1::StreamInfo {
                    key: s.key,
                    length: s.length,
                    closed: s.closed,
                    updated_at: convert::timestamp(s.updated_at),
                })
                .collect(),
        }))
    }

    async fn resume_workflow(
        &self,
        req: Request<v1::ResumeWorkflowRequest>,
    ) -> Result<Response<v1::ResumeWorkflowResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let w = engine
            .workflows()
            .resume_workflow(&req.into_inner().workflow_id)
            .await
            .map_err(to_status)?;
        note_workflow(&w);
        Ok(Response::new(v1::ResumeWorkflowResponse {
            workflow: Some(convert::workflow(w)),
        }))
    }
}

pub(crate) fn page_request(size: i32, token: String) -> crate::engine::pages::PageRequest {
    crate::engine::pages::PageRequest { size, token }
}

/// A start from the wire, in the span `trace` of the call that asked for it.
fn start_request(
    r: v1::StartWorkflowRequest,
    trace: Option<waymark_store::TraceContext>,
) -> Result<StartRequest, Status> {
    Ok(StartRequest {
        input: convert::payload_text("input", r.input.as_ref())?,
        workflow_name: r.workflow_name,
        workflow_id: r.workflow_id,
        queue_name: r.queue_name,
        app_version: r.app_version,
        timeout_ms: convert::duration_ms("timeout", r.timeout.as_ref())?,
        priority: r.priority,
        partition_key: r.partition_key,
        dedup_id: r.dedup_id,
        return_existing: r.on_duplicate == v1::DuplicatePolicy::ReturnExisting as i32,
        delay_ms: convert::duration_ms("delay", r.delay.as_ref())?,
        debounce_key: r.debounce.as_ref().map(|d| d.key.clone()).unwrap_or_default(),
        debounce_max_delay_ms: match &r.debounce {
            Some(d) => convert::duration_ms("debounce.max_delay", d.max_delay.as_ref())?,
            None => None,
        },
        trace,
        allow_unregistered: r.allow_unregistered,
        tags: r.tags.into_iter().collect(),
    })
}
