//! Malformed bytes on every RPC: for each method of every Waymark service, messages of random
//! bytes (and a few crafted ones: invalid UTF-8 in a string field, a truncated varint, a length
//! past the end). The server answers each with a status — never INTERNAL or UNKNOWN, which
//! would mean a malformed request was taken for the server's own fault — and keeps serving.

use std::time::Duration;

use bytes::{Buf, BufMut};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use waymark_integration_tests::{fast_recovery_args, Backend, ServerProcess, TestDatabase};

/// Sends bytes as they are; reads whatever comes back as bytes.
#[derive(Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let bytes = src.chunk().to_vec();
        src.advance(bytes.len());
        Ok(Some(bytes))
    }
}

/// Every method of the Waymark services, as `/package.Service/Method`.
fn methods() -> Vec<String> {
    let fds: prost_types::FileDescriptorSet =
        prost::Message::decode(waymark_proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
    let mut out = Vec::new();
    for file in fds.file {
        for service in &file.service {
            for m in &service.method {
                out.push(format!("/{}.{}/{}", file.package(), service.name(), m.name()));
            }
        }
    }
    out
}

/// A small deterministic generator, so a failure names its input.
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn blob(&mut self) -> Vec<u8> {
        let len = (self.next() % 300) as usize;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn crafted() -> Vec<Vec<u8>> {
    vec![
        vec![],
        vec![0x0A, 0x02, 0xFF, 0xFE],             // field 1 string, not UTF-8
        vec![0x0A, 0x7F, 0x61],                   // a length past the end
        vec![0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], // a varint cut short
        vec![0xFF; 64],                           // no valid tag at all
    ]
}

async fn call(channel: tonic::transport::Channel, path: &str, body: Vec<u8>) -> Result<(), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path: tonic::codegen::http::uri::PathAndQuery = path.parse().unwrap();
    let mut req = tonic::Request::new(tokio_stream::iter(vec![body]));
    // Some methods wait (events, streams, awaits, the worker stream): do not wait long.
    req.set_timeout(Duration::from_millis(800));
    let mut answer = grpc.streaming(req, path, Raw).await?.into_inner();
    while answer.message().await?.is_some() {}
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bytes_on_every_rpc_are_refused_and_the_server_stays_up() {
    let Some(db) = TestDatabase::new(Backend::Sqlite).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let methods = methods();
    assert!(methods.len() > 20, "the services' methods: {methods:?}");
    let mut gen = Bytes(0x9E37_79B9_7F4A_7C15);
    let mut refused = 0;
    for path in &methods {
        let mut bodies = crafted();
        bodies.extend((0..25).map(|_| gen.blob()));
        for body in bodies {
            if let Err(s) = call(channel.clone(), path, body.clone()).await {
                assert!(
                    !matches!(
                        s.code(),
                        tonic::Code::Internal | tonic::Code::Unknown | tonic::Code::Unavailable
                    ),
                    "{path} answered {s:?} to {body:02x?}"
                );
                refused += 1;
            }
        }
        // Still serving.
        let client = server.client().await;
        let e = client.get("after-the-noise").await.unwrap_err();
        assert_eq!(e.reason(), Some("WORKFLOW_NOT_FOUND"), "after {path}: {e:?}");
    }
    assert!(refused > methods.len() * 5, "most of the noise was refused ({refused})");
}
