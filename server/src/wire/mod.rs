//! The wire and the engine, each in the other's terms: protobuf messages to engine types and
//! back ([`convert`]), and engine errors as `google.rpc.Status` ([`status`]). Both the gRPC
//! services (`api`) and the worker stream's operations (`ops`) speak through it.

pub mod convert;
pub mod status;
