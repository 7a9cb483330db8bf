//! Engine errors as gRPC statuses: a `google.rpc.Status` carrying an `ErrorInfo` whose reason a
//! program can match, and a message safe to show.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::engine::{EngineError, ErrorCode};

pub const DOMAIN: &str = "waymark.dev";

pub fn code(c: ErrorCode) -> Code {
    match c {
        ErrorCode::InvalidArgument => Code::InvalidArgument,
        ErrorCode::NotFound => Code::NotFound,
        ErrorCode::AlreadyExists => Code::AlreadyExists,
        ErrorCode::FailedPrecondition => Code::FailedPrecondition,
        ErrorCode::Aborted => Code::Aborted,
        ErrorCode::ResourceExhausted => Code::ResourceExhausted,
        ErrorCode::DeadlineExceeded => Code::DeadlineExceeded,
        ErrorCode::Unavailable => Code::Unavailable,
        ErrorCode::Internal => Code::Internal,
        ErrorCode::Unauthenticated => Code::Unauthenticated,
        ErrorCode::PermissionDenied => Code::PermissionDenied,
    }
}

/// The code's name as the metrics spell it (`tonic::Code`'s own names), without allocating.
pub fn code_name(c: ErrorCode) -> &'static str {
    match c {
        ErrorCode::InvalidArgument => "InvalidArgument",
        ErrorCode::NotFound => "NotFound",
        ErrorCode::AlreadyExists => "AlreadyExists",
        ErrorCode::FailedPrecondition => "FailedPrecondition",
        ErrorCode::Aborted => "Aborted",
        ErrorCode::ResourceExhausted => "ResourceExhausted",
        ErrorCode::DeadlineExceeded => "DeadlineExceeded",
        ErrorCode::Unavailable => "Unavailable",
        ErrorCode::Internal => "Internal",
        ErrorCode::Unauthenticated => "Unauthenticated",
        ErrorCode::PermissionDenied => "PermissionDenied",
    }
}

pub fn to_status(e: EngineError) -> Status {
    Status::with_error_details(
        code(e.code),
        e.message,
        ErrorDetails::with_error_info(
            e.reason,
            DOMAIN,
            e.metadata
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<HashMap<String, String>>(),
        ),
    )
}

pub fn invalid(message: impl Into<String>) -> Status {
    to_status(EngineError::invalid(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_carries_reason_and_safe_message() {
        let s = to_status(EngineError::not_found("wf-1"));
        assert_eq!(s.code(), Code::NotFound);
        assert!(s.message().contains("wf-1"));
        let info = s.get_details_error_info().expect("error info");
        assert_eq!(info.reason, "WORKFLOW_NOT_FOUND");
        assert_eq!(info.domain, DOMAIN);
    }

    /// The worker commands' metrics spell a code as the RPC metrics do.
    #[test]
    fn code_names_are_tonics() {
        use ErrorCode::*;
        for c in [
            InvalidArgument,
            NotFound,
            AlreadyExists,
            FailedPrecondition,
            Aborted,
            ResourceExhausted,
            DeadlineExceeded,
            Unavailable,
            Internal,
            Unauthenticated,
            PermissionDenied,
        ] {
            assert_eq!(code_name(c), format!("{:?}", code(c)));
        }
    }
}
