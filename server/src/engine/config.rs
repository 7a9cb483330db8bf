//! Engine settings. Every duration here is a policy a deployment may tune; the defaults suit a
//! single machine.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// A worker that sends nothing for this long loses its lease: its workflows are recovered.
    pub worker_lease: Duration,
    /// How often workers are asked to heartbeat (a fraction of the lease).
    pub heartbeat_interval: Duration,
    /// After a worker's stream ends, how long its workflows wait for it to come back before they
    /// return to their queue.
    pub recovery_grace: Duration,
    /// How often this replica looks for expired leases.
    pub recovery_interval: Duration,
    /// A workflow recovered more often than this is dead-lettered.
    pub max_recovery_attempts: u32,
    /// How often the dispatcher looks for work it was not told about (work enqueued through
    /// another replica).
    pub dispatch_poll_interval: Duration,
    /// Largest JSON payload (input, step result, output) in bytes.
    pub max_payload_bytes: usize,
    /// How long a draining server waits for in-flight worker requests.
    pub drain_timeout: Duration,
    /// How often the database is pinged for health (and to pause recovery while it is away).
    pub health_interval: Duration,
    /// Most worker streams this replica holds at once; more are refused (RESOURCE_EXHAUSTED).
    pub max_worker_streams: usize,
    /// Most requests one worker stream may have in flight; the stream is not read further until
    /// one finishes (backpressure through HTTP/2 flow control).
    pub max_requests_per_stream: usize,
    /// Most bytes of history (input and recorded steps, as JSON text) one dispatch carries. A
    /// workflow past it fails with HISTORY_TOO_LARGE when it would be dispatched again. Sized
    /// so that even JSON that grows five-fold on the wire stays within the stream's 256 MiB.
    pub max_history_bytes: usize,
    /// Most client calls waiting at once on this replica (AwaitWorkflow, GetEvent with a
    /// timeout, ReadStream); more are refused with RESOURCE_EXHAUSTED TOO_MANY_WAITS.
    pub max_waits: usize,
    /// Most unread messages a workflow's inbox holds; a send past it is refused with
    /// RESOURCE_EXHAUSTED INBOX_FULL until the workflow reads some.
    pub max_unread_messages: u32,
    /// How long a unary call that does not wait may take before the server answers
    /// DEADLINE_EXCEEDED (a client's own shorter deadline wins). Calls that wait get this on
    /// top of their wait.
    pub request_timeout: Duration,
    /// The namespace this engine serves, as metrics and spans name it.
    pub namespace: String,
    /// Which finished workflows are deleted, and when (see [`super::retention`]).
    pub retention: super::retention::Retention,
}

impl EngineConfig {
    /// Largest message a worker may send on its stream (told in `Welcome`): room for two
    /// payloads (a workflow's output beside the last step records it carries) and the rest of
    /// the message. SDKs split what would be larger.
    pub fn max_worker_message_bytes(&self) -> usize {
        2 * self.max_payload_bytes + 1024 * 1024
    }

    /// Largest message the server sends a worker: what every SDK reads (a dispatch carrying a
    /// full history, see `max_history_bytes`).
    pub fn max_dispatch_bytes(&self) -> usize {
        256 * 1024 * 1024
    }

    /// What the server actually decodes from a worker: well above what workers are told, so a
    /// message a little over the limit gets a clear error instead of ending the stream.
    pub fn worker_decode_limit(&self) -> usize {
        4 * self.max_worker_message_bytes()
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            worker_lease: Duration::from_secs(15),
            heartbeat_interval: Duration::from_secs(3),
            recovery_grace: Duration::from_secs(5),
            recovery_interval: Duration::from_secs(1),
            max_recovery_attempts: 100,
            dispatch_poll_interval: Duration::from_millis(500),
            max_payload_bytes: 4 * 1024 * 1024,
            drain_timeout: Duration::from_secs(10),
            health_interval: Duration::from_secs(1),
            max_worker_streams: 10_000,
            max_requests_per_stream: 1_024,
            max_history_bytes: 32 * 1024 * 1024,
            max_waits: 10_000,
            max_unread_messages: 10_000,
            request_timeout: Duration::from_secs(60),
            namespace: "default".to_string(),
            retention: Default::default(),
        }
    }
}
