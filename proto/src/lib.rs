//! The Waymark wire contract as Rust types, generated at build time from `proto/waymark/v1`.
//!
//! Besides the generated code, this crate holds the small conversions every Rust program needs:
//! JSON values to and from `Payload`, and the encoded descriptor set for server reflection.

#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("waymark.v1");
}

pub mod codec;
pub mod json;

/// Encoded `FileDescriptorSet` of the contract, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/waymark_descriptor.bin"));
