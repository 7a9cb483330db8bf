//! A worker stream spoken by hand, so a test decides exactly what a worker sends — including
//! what no SDK would: forged epochs, other workers' ids, floods.

use tokio::sync::mpsc;
use tokio_stream::{wrappers::ReceiverStream, StreamExt};
use waymark_proto::v1::{
    self, server_message, worker_message, worker_service_client::WorkerServiceClient, WorkerMessage,
};

use crate::workload::PATIENCE;

pub struct RawWorker {
    tx: mpsc::Sender<WorkerMessage>,
    inbound: tonic::Streaming<v1::ServerMessage>,
    next_request: u64,
}

impl RawWorker {
    /// Connects as `worker_id` serving `workflow_names`; panics if refused.
    pub async fn connect(addr: &str, worker_id: &str, workflow_names: &[&str]) -> RawWorker {
        Self::hello(addr, Self::hello_of(worker_id, workflow_names))
            .await
            .expect("the server welcomes the worker")
    }

    /// The hello an ordinary worker would send.
    pub fn hello_of(worker_id: &str, workflow_names: &[&str]) -> v1::Hello {
        v1::Hello {
            worker_id: worker_id.into(),
            app_version: "raw-1".into(),
            workflow_names: workflow_names.iter().map(|s| s.to_string()).collect(),
            sdk: "test/raw".into(),
            ..Default::default()
        }
    }

    /// Says `hello`; the server's refusal, or the welcomed stream.
    pub async fn hello(addr: &str, hello: v1::Hello) -> Result<RawWorker, tonic::Status> {
        Self::hello_with_key(addr, hello, None).await
    }

    /// Says `hello` presenting an API key (`authorization: Bearer <key>`).
    pub async fn hello_with_key(addr: &str, hello: v1::Hello, key: Option<&str>) -> Result<RawWorker, tonic::Status> {
        let bearer = key.map(|k| format!("Bearer {k}"));
        let metadata: Vec<(&str, &str)> = bearer.iter().map(|b| ("authorization", b.as_str())).collect();
        Self::hello_with(addr, hello, &metadata).await
    }

    /// Says `hello` with these metadata (`authorization`, `waymark-namespace`).
    pub async fn hello_with(
        addr: &str,
        hello: v1::Hello,
        metadata: &[(&'static str, &str)],
    ) -> Result<RawWorker, tonic::Status> {
        let channel = tonic::transport::Channel::from_shared(addr.to_string())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = WorkerServiceClient::new(channel).max_encoding_message_size(64 * 1024 * 1024);
        let (tx, rx) = mpsc::channel(64);
        // The hello goes first: the server answers the call only once it has read it.
        tx.send(WorkerMessage {
            request_id: 0,
            kind: Some(worker_message::Kind::Hello(hello)),
        })
        .await
        .unwrap();
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        for (name, value) in metadata {
            request.metadata_mut().insert(*name, value.parse().unwrap());
        }
        let mut w = RawWorker {
            tx,
            inbound: client.connect(request).await?.into_inner(),
            next_request: 0,
        };
        match w.inbound.message().await? {
            Some(v1::ServerMessage {
                kind: Some(server_message::Kind::Welcome(_)),
            }) => Ok(w),
            other => panic!("expected a welcome, got {other:?}"),
        }
    }

    /// Sends a request and waits for its reply (other messages meanwhile are skipped).
    pub async fn request(&mut self, kind: worker_message::Kind) -> v1::reply::Result {
        let id = self.send(kind).await;
        loop {
            if let server_message::Kind::Reply(r) = self.next().await {
                if r.request_id == id {
                    return r.result.expect("a reply carries a result");
                }
            }
        }
    }

    /// The sending half, for a test that writes and reads at once.
    pub fn sender(&self) -> mpsc::Sender<WorkerMessage> {
        self.tx.clone()
    }

    /// Sends a message with no request id of its own (a batch, whose messages carry theirs).
    pub async fn send_raw(&mut self, kind: worker_message::Kind) {
        self.tx
            .send(WorkerMessage {
                request_id: 0,
                kind: Some(kind),
            })
            .await
            .unwrap();
    }

    pub async fn send(&mut self, kind: worker_message::Kind) -> u64 {
        self.next_request += 1;
        self.tx
            .send(WorkerMessage {
                request_id: self.next_request,
                kind: Some(kind),
            })
            .await
            .unwrap();
        self.next_request
    }

    /// Reads until the server ends the stream with an error, and returns it.
    pub async fn closed_with(&mut self) -> tonic::Status {
        loop {
            match tokio::time::timeout(PATIENCE, self.inbound.next())
                .await
                .expect("the stream ends in time")
            {
                Some(Ok(_)) => continue,
                Some(Err(s)) => return s,
                None => panic!("the stream ended without an error"),
            }
        }
    }

    pub async fn next(&mut self) -> server_message::Kind {
        loop {
            let m = tokio::time::timeout(PATIENCE, self.inbound.next())
                .await
                .expect("a message from the server in time")
                .expect("the stream is open")
                .expect("no stream error");
            if let Some(k) = m.kind {
                return k;
            }
        }
    }

    pub async fn next_dispatch(&mut self) -> v1::DispatchWorkflow {
        loop {
            if let server_message::Kind::DispatchWorkflow(d) = self.next().await {
                return d;
            }
        }
    }
}

/// A completion of `workflow_id` at `epoch` with `output`, as a raw worker sends it.
pub fn complete(workflow_id: &str, epoch: u64, output: serde_json::Value) -> worker_message::Kind {
    worker_message::Kind::CompleteWorkflow(v1::CompleteWorkflow {
        workflow_id: workflow_id.into(),
        epoch,
        outcome: Some(v1::complete_workflow::Outcome::Output(waymark_proto::json::to_payload(
            &output,
        ))),
        steps: vec![],
    })
}
