//! The client: start workflows and watch them.

use std::time::Duration;

use serde::Serialize;
use waymark_proto::{
    json, v1,
    v1::{
        admin_service_client::AdminServiceClient, queue_service_client::QueueServiceClient,
        schedule_service_client::ScheduleServiceClient, workflow_service_client::WorkflowServiceClient,
    },
};

use crate::connection::Transport;
use crate::{ConnectOptions, Error, Started, StartedAndSent, StepInfo, WorkflowInfo, WorkflowStatus};

/// Options of a start. All optional.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Makes the start idempotent: starting the same id again returns the existing workflow.
    pub workflow_id: Option<String>,
    /// Queue name; "default" when not given.
    pub queue: Option<String>,
    /// Pin the workflow to workers of this application version.
    pub app_version: Option<String>,
    /// Cancel the workflow (and its children) if it has not finished this long after the start.
    pub timeout: Option<Duration>,
    /// Lower is dispatched first within the queue; FIFO within a priority. Default 0.
    pub priority: i32,
    /// The partition of the queue (a queue with a partition concurrency limits each key).
    pub partition_key: Option<String>,
    /// Unique among the queue's unfinished workflows: a second start with it fails with
    /// [`Error::Rpc`] reason `DEDUP_ID_TAKEN`, unless `return_existing` is set.
    pub dedup_id: Option<String>,
    /// On a taken dedup id, return the workflow holding it (`created` false).
    pub return_existing: bool,
    /// Do not dispatch before this long from now.
    pub delay: Option<Duration>,
    /// Collapse repeated starts with this key onto one delayed workflow (needs `delay`).
    pub debounce_key: Option<String>,
    /// With `debounce_key`: the longest it may be put off in all (default ten times `delay`).
    pub debounce_max_delay: Option<Duration>,
    /// Enqueue it even if no worker has registered the workflow's name yet (it waits until one
    /// does; [`Started::name_registered`] is then false). Otherwise such a start fails with
    /// reason `WORKFLOW_NAME_UNKNOWN`.
    pub allow_unregistered: bool,
    /// Labels to find it by (`ListOptions::tags`); its children inherit them. At most 16;
    /// keys 1-64 of letters, digits and `_ - . /`, values up to 256 characters.
    pub tags: std::collections::BTreeMap<String, String>,
}

/// The start request for `workflow_name` with `input` and `options`.
fn start_request(workflow_name: &str, input: serde_json::Value, options: StartOptions) -> v1::StartWorkflowRequest {
    v1::StartWorkflowRequest {
        workflow_name: workflow_name.to_string(),
        // Chosen here rather than by the server, so a start sent again is the same start.
        workflow_id: options.workflow_id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        input: Some(json::to_payload(&input)),
        queue_name: options.queue.unwrap_or_default(),
        app_version: options.app_version.unwrap_or_default(),
        timeout: options.timeout.map(duration),
        priority: options.priority,
        partition_key: options.partition_key.unwrap_or_default(),
        dedup_id: options.dedup_id.unwrap_or_default(),
        on_duplicate: if options.return_existing {
            v1::DuplicatePolicy::ReturnExisting as i32
        } else {
            v1::DuplicatePolicy::Unspecified as i32
        },
        delay: options.delay.map(duration),
        debounce: options.debounce_key.map(|key| v1::Debounce {
            key,
            max_delay: options.debounce_max_delay.map(duration),
        }),
        allow_unregistered: options.allow_unregistered,
        tags: options.tags.into_iter().collect(),
    }
}

pub(crate) fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

impl StartOptions {
    pub fn id(id: impl Into<String>) -> Self {
        StartOptions {
            workflow_id: Some(id.into()),
            ..Default::default()
        }
    }
}

/// Filters of a list. Newest first.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub statuses: Vec<WorkflowStatus>,
    pub workflow_name: Option<String>,
    pub queue: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_after_ms: Option<i64>,
    pub created_before_ms: Option<i64>,
    pub page_size: i32,
    pub page_token: Option<String>,
    /// Running on, or last run by, this worker id.
    pub worker_id: Option<String>,
    /// Pinned to this application version.
    pub app_version: Option<String>,
    /// Children of this workflow.
    pub parent_workflow_id: Option<String>,
    /// Count every match too ([`WorkflowPage::total`]); first page only.
    pub include_total: bool,
    /// Carrying every one of these tags.
    pub tags: std::collections::BTreeMap<String, String>,
    /// Whose id starts with this (a schedule's runs: `schedule:<name>:`).
    pub workflow_id_prefix: Option<String>,
}

/// One page of workflows.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowPage {
    pub workflows: Vec<WorkflowInfo>,
    /// The token of the next page; `None` on the last.
    pub next_page_token: Option<String>,
    /// How many workflows match, when `include_total` was asked on the first page.
    pub total: Option<u64>,
}

pub(crate) fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

#[derive(Clone)]
pub struct Client {
    pub(crate) rpc: WorkflowServiceClient<Transport>,
    pub(crate) queues: QueueServiceClient<Transport>,
    pub(crate) schedules: ScheduleServiceClient<Transport>,
    pub(crate) admin: AdminServiceClient<Transport>,
    /// For services used now and then (a client made per call).
    pub(crate) channel: Transport,
    /// How long calls that are safe to repeat are sent again while the server answers
    /// UNAVAILABLE (see [`Client::resend_for`]).
    pub(crate) resend_for: Duration,
}

impl Client {
    /// Connects to the server at `addr` (`http://host:port`, `https://host:port` or
    /// `host:port`), with TLS settings, API key and namespace from the environment (see
    /// [`ConnectOptions`]).
    pub async fn connect(addr: &str) -> Result<Client, Error> {
        Self::connect_with(&ConnectOptions::new(addr)).await
    }

    /// Connects with explicit options (TLS, API key, namespace); unset ones come from the
    /// environment.
    pub async fn connect_with(options: &ConnectOptions) -> Result<Client, Error> {
        let channel = options.connect().await?;
        Ok(Client {
            rpc: WorkflowServiceClient::new(channel.clone()).max_decoding_message_size(64 * 1024 * 1024),
            queues: QueueServiceClient::new(channel.clone()),
            schedules: ScheduleServiceClient::new(channel.clone()),
            admin: AdminServiceClient::new(channel.clone()),
            channel,
            resend_for: Duration::from_secs(60),
        })
    }

    /// While the server, or its database, is unavailable, calls that are safe to repeat are sent
    /// again with backoff for up to this long (default 60 s; zero sends once): reads, awaits,
    /// starts (a start without an id gets one here, so a resend is the same start), cancels,
    /// resumes, and sends that carry an idempotency key. Others fail at once.
    pub fn resend_for(mut self, bound: Duration) -> Self {
        self.resend_for = bound;
        self
    }

    /// Connects to `WAYMARK_SERVER`, else `http://127.0.0.1:7450`, with everything else from
    /// the environment too.
    pub async fn from_env() -> Result<Client, Error> {
        Self::connect_with(&ConnectOptions::from_env()).await
    }

    /// Starts a workflow with a typed input.
    pub async fn start<I: Serialize>(
        &self,
        workflow_name: &str,
        input: &I,
        options: StartOptions,
    ) -> Result<Started, Error> {
        self.start_json(workflow_name, serde_json::to_value(input)?, options)
            .await
    }

    /// Starts a workflow with a JSON input.
    pub async fn start_json(
        &self,
        workflow_name: &str,
        input: serde_json::Value,
        options: StartOptions,
    ) -> Result<Started, Error> {
        let req = start_request(workflow_name, input, options);
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.start_workflow(req).await }
        })
        .await?
        .into_inner();
        Ok(Started {
            workflow: workflow(r.workflow)?,
            created: r.created,
            name_registered: r.name_registered,
        })
    }

    /// Starts a workflow unless one was started under the id already, and sends it `message` on
    /// `topic`, in one call and one transaction: the message is there before the workflow first
    /// runs. Give the workflow an id (`StartOptions::id`) to reach the same one each time — one
    /// per customer, say — and a key to make a retried call deliver once. A debounced start is
    /// refused. A workflow under the id that ended with an outcome takes no more messages
    /// (`WORKFLOW_NOT_RUNNING`).
    pub async fn start_and_send<I: Serialize, M: Serialize>(
        &self,
        workflow_name: &str,
        input: &I,
        options: StartOptions,
        topic: &str,
        message: &M,
        idempotency_key: Option<&str>,
    ) -> Result<StartedAndSent, Error> {
        let req = v1::StartAndSendRequest {
            start: Some(start_request(workflow_name, serde_json::to_value(input)?, options)),
            topic: topic.into(),
            message: Some(json::to_payload(&serde_json::to_value(message)?)),
            idempotency_key: idempotency_key.unwrap_or_default().into(),
        };
        // The start is the same start when sent again (its id is chosen here); the send is
        // delivered once only with a key.
        let r = crate::resend::retrying(self.keyed_resend(idempotency_key), || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.start_and_send(req).await }
        })
        .await?
        .into_inner();
        Ok(StartedAndSent {
            started: Started {
                workflow: workflow(r.workflow)?,
                created: r.created,
                name_registered: r.name_registered,
            },
            message_id: r.message_id,
            duplicate: r.duplicate,
        })
    }

    /// Moves the start of a workflow still waiting for its delayed start to `delay` from now.
    pub async fn delay(&self, workflow_id: &str, delay: Duration) -> Result<WorkflowInfo, Error> {
        let r = self
            .rpc
            .clone()
            .delay_workflow(v1::DelayWorkflowRequest {
                workflow_id: workflow_id.into(),
                delay: Some(duration(delay)),
            })
            .await?;
        workflow(r.into_inner().workflow)
    }

    pub async fn get(&self, workflow_id: &str) -> Result<WorkflowInfo, Error> {
        let req = v1::GetWorkflowRequest {
            workflow_id: workflow_id.into(),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.get_workflow(req).await }
        })
        .await?;
        workflow(r.into_inner().workflow)
    }

    /// A workflow's recorded history — its name, input and steps — in the form a
    /// [`Replayer`](crate::Replayer) replays and `waymark workflow export` prints.
    pub async fn history(&self, workflow_id: &str) -> Result<crate::RecordedHistory, Error> {
        let w = self.get(workflow_id).await?;
        let steps = self.steps(workflow_id).await?;
        Ok(crate::RecordedHistory {
            workflow_id: w.workflow_id,
            workflow_name: w.workflow_name,
            input: w.input,
            steps: steps.into_iter().map(crate::RecordedStep::from).collect(),
        })
    }

    /// Waits until the workflow is terminal. With a timeout, gives up after it with a
    /// `DEADLINE_EXCEEDED` error.
    pub async fn await_workflow(&self, workflow_id: &str, timeout: Option<Duration>) -> Result<WorkflowInfo, Error> {
        // Resent within the caller's timeout: each attempt waits only for what is left of it.
        let until = timeout.map(|t| tokio::time::Instant::now() + t);
        let bound = timeout.map_or(self.resend_for, |t| t.min(self.resend_for));
        let r = crate::resend::retrying(bound, || {
            let mut c = self.rpc.clone();
            let mut req = tonic::Request::new(v1::AwaitWorkflowRequest {
                workflow_id: workflow_id.into(),
            });
            if let Some(u) = until {
                req.set_timeout(u.saturating_duration_since(tokio::time::Instant::now()));
            }
            async move { c.await_workflow(req).await }
        })
        .await?;
        workflow(r.into_inner().workflow)
    }

    /// One page of workflows and the token of the next page (None on the last page).
    pub async fn list(&self, options: ListOptions) -> Result<(Vec<WorkflowInfo>, Option<String>), Error> {
        let page = self.list_page(options).await?;
        Ok((page.workflows, page.next_page_token))
    }

    /// One page of workflows, with the count of all matches when asked for.
    pub async fn list_page(&self, options: ListOptions) -> Result<WorkflowPage, Error> {
        let r = self
            .rpc
            .clone()
            .list_workflows(v1::ListWorkflowsRequest {
                statuses: options.statuses.iter().map(|s| s.to_wire() as i32).collect(),
                workflow_name: options.workflow_name.unwrap_or_default(),
                queue_name: options.queue.unwrap_or_default(),
                created_after: options.created_after_ms.map(timestamp),
                created_before: options.created_before_ms.map(timestamp),
                page_size: options.page_size,
                page_token: options.page_token.unwrap_or_default(),
                worker_id: options.worker_id.unwrap_or_default(),
                app_version: options.app_version.unwrap_or_default(),
                parent_workflow_id: options.parent_workflow_id.unwrap_or_default(),
                include_total: options.include_total,
                tags: options.tags.into_iter().collect(),
                workflow_id_prefix: options.workflow_id_prefix.unwrap_or_default(),
            })
            .await?
            .into_inner();
        Ok(WorkflowPage {
            next_page_token: (!r.next_page_token.is_empty()).then_some(r.next_page_token),
            total: r.total,
            workflows: r.workflows.into_iter().map(WorkflowInfo::from).collect(),
        })
    }

    pub async fn steps(&self, workflow_id: &str) -> Result<Vec<StepInfo>, Error> {
        crate::pages::read_all(|page_token| async move {
            let req = v1::ListStepsRequest {
                workflow_id: workflow_id.into(),
                page_size: 0,
                page_token,
            };
            let r = crate::resend::retrying(self.resend_for, || {
                let (mut c, req) = (self.rpc.clone(), req.clone());
                async move { c.list_steps(req).await }
            })
            .await?
            .into_inner();
            Ok((r.steps.into_iter().map(StepInfo::from).collect(), r.next_page_token))
        })
        .await
    }

    /// Cancels a workflow; it stops at its next step. Finished workflows are returned as they are.
    pub async fn cancel(&self, workflow_id: &str) -> Result<WorkflowInfo, Error> {
        self.cancel_with(workflow_id, false).await
    }

    /// Cancels a workflow and, with `cascade`, its child workflows and theirs.
    pub async fn cancel_with(&self, workflow_id: &str, cascade: bool) -> Result<WorkflowInfo, Error> {
        let req = v1::CancelWorkflowRequest {
            workflow_id: workflow_id.into(),
            cascade,
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.cancel_workflow(req).await }
        })
        .await?;
        workflow(r.into_inner().workflow)
    }

    pub async fn resume(&self, workflow_id: &str) -> Result<WorkflowInfo, Error> {
        let req = v1::ResumeWorkflowRequest {
            workflow_id: workflow_id.into(),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.resume_workflow(req).await }
        })
        .await?;
        workflow(r.into_inner().workflow)
    }
}

fn workflow(w: Option<v1::Workflow>) -> Result<WorkflowInfo, Error> {
    w.map(WorkflowInfo::from)
        .ok_or_else(|| Error::Serialization("the server's answer carried no workflow".into()))
}
