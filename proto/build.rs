//! Generates the Rust types and tonic stubs from `proto/waymark/v1/*.proto` with protox, a pure
//! Rust protobuf compiler, so no system `protoc` is needed. The descriptor set is kept for server
//! reflection.
use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "waymark/v1/types.proto",
        "waymark/v1/workflow.proto",
        "waymark/v1/worker.proto",
        "waymark/v1/queue.proto",
        "waymark/v1/schedule.proto",
        "waymark/v1/admin.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["."])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(out.join("waymark_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // The worker RPC is named `Connect`, which would collide with the generated
        // `connect(dst)` constructor: clients are built with `new(channel)` instead.
        .build_transport(false)
        // Malformed requests are INVALID_ARGUMENT, not INTERNAL (see src/codec.rs).
        .codec_path("crate::codec::WaymarkCodec")
        .compile_fds(fds)?;
    Ok(())
}
