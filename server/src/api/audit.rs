//! The audit trail: who did what. Every call that can change something (a write, an admin call,
//! a worker stream opened) and every call refused for its key (`UNAUTHENTICATED`,
//! `PERMISSION_DENIED`) leaves one `info` line on the tracing target `waymark::audit`, with the
//! key id, the namespace, the method, the resource it named and the outcome:
//!
//! ```text
//! INFO waymark::audit: call audited key_id=3f2a9c0d1e4b5a67 namespace=billing
//!   method=waymark.v1.WorkflowService/CancelWorkflow resource=order-17 outcome=Ok peer=10.0.0.7:51234
//! ```
//!
//! Never a secret (a key appears only by its public id) and never a payload. Reads are not
//! audited; the access log (`waymark::access`) has every call. A worker stream is audited once,
//! when it opens: the writes on it are fenced to the workflows dispatched to it.
//!
//! What a call learns as it goes — its key (the authentication layer), its namespace and the
//! resource it names (the handlers) — is noted in a slot the observing layer scopes over the call
//! ([`CallNotes`]), so the line carries them as its own fields whatever the span filters are.

use std::sync::{Arc, Mutex};

use crate::auth::access::Access;

/// What one call noted about itself.
#[derive(Debug, Default, Clone)]
pub struct Notes {
    pub key_id: Option<String>,
    pub namespace: Option<String>,
    /// The workflow, queue, schedule, key or namespace the call names.
    pub resource: Option<String>,
}

pub type CallNotes = Arc<Mutex<Notes>>;

tokio::task_local! {
    static NOTES: CallNotes;
}

/// Runs `call` with a fresh slot for its notes.
pub async fn scoped<F: std::future::Future>(notes: CallNotes, call: F) -> F::Output {
    NOTES.scope(notes, call).await
}

fn note(f: impl FnOnce(&mut Notes)) {
    // Outside a call (unit tests, background work) there is nothing to note.
    let _ = NOTES.try_with(|n| f(&mut n.lock().unwrap()));
}

pub fn note_key(key_id: &str) {
    note(|n| n.key_id = Some(key_id.to_string()));
}

pub fn note_namespace(namespace: &str) {
    note(|n| n.namespace = Some(namespace.to_string()));
}

/// The workflow, queue, schedule, key or namespace a call acts on.
pub fn note_resource(id: &str) {
    note(|n| n.resource = Some(id.to_string()));
}

/// Notes `name` as the call's resource and hands it back.
pub fn noted(name: String) -> String {
    note_resource(&name);
    name
}

/// Whether a call answered with gRPC status `code` belongs in the audit trail.
pub fn audited(access: Access, code: tonic::Code) -> bool {
    matches!(
        access,
        Access::Write | Access::Work | Access::Administer | Access::Server
    ) || matches!(code, tonic::Code::Unauthenticated | tonic::Code::PermissionDenied)
}

/// Leaves the audit line of a call.
pub fn log(method: &str, code: tonic::Code, peer: &str, notes: &Notes) {
    let none = "-";
    tracing::info!(
        target: "waymark::audit",
        key_id = notes.key_id.as_deref().unwrap_or(none),
        namespace = notes.namespace.as_deref().unwrap_or(none),
        method,
        resource = notes.resource.as_deref().unwrap_or(none),
        outcome = ?code,
        peer,
        "call audited"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_refusals_are_audited_reads_are_not() {
        use tonic::Code;
        for access in [Access::Write, Access::Work, Access::Administer] {
            assert!(audited(access, Code::Ok), "{access:?}");
            assert!(audited(access, Code::NotFound), "{access:?}");
        }
        assert!(!audited(Access::Read, Code::Ok));
        assert!(!audited(Access::Read, Code::NotFound));
        assert!(!audited(Access::Open, Code::Ok));
        assert!(audited(Access::Read, Code::PermissionDenied));
        assert!(audited(Access::Open, Code::Unauthenticated));
    }

    #[tokio::test]
    async fn notes_are_kept_per_call() {
        let a = CallNotes::default();
        let b = CallNotes::default();
        scoped(a.clone(), async {
            note_key("k1");
            note_resource("wf-1");
        })
        .await;
        scoped(b.clone(), async { note_namespace("billing") }).await;
        note_key("outside");
        let a = a.lock().unwrap().clone();
        let b = b.lock().unwrap().clone();
        assert_eq!(
            (a.key_id.as_deref(), a.resource.as_deref(), a.namespace),
            (Some("k1"), Some("wf-1"), None)
        );
        assert_eq!((b.key_id, b.namespace.as_deref()), (None, Some("billing")));
    }
}
