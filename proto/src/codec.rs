//! The codec every Waymark service and client uses: protobuf through prost, except that a
//! request that does not decode is the caller's mistake — INVALID_ARGUMENT with the reason
//! MALFORMED_REQUEST — not the server's (prost's codec answers INTERNAL, as gRPC's status table
//! suggests for parse errors). Invalid UTF-8 in a string field is the common case.

use tonic::{
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
    Status,
};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};
use tonic_types::{ErrorDetails, StatusExt};

/// [`ProstCodec`] with decode errors as INVALID_ARGUMENT (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct WaymarkCodec<T, U>(ProstCodec<T, U>);

impl<T, U> WaymarkCodec<T, U> {
    pub fn new() -> Self {
        WaymarkCodec(ProstCodec::new())
    }
}

impl<T, U> Codec for WaymarkCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = MalformedIsInvalid<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        MalformedIsInvalid(self.0.decoder())
    }
}

/// A decoder whose failures are the sender's: INVALID_ARGUMENT, MALFORMED_REQUEST.
#[derive(Debug, Clone)]
pub struct MalformedIsInvalid<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for MalformedIsInvalid<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            let message = format!("the message is not valid protobuf: {}", s.message());
            Status::with_error_details(
                tonic::Code::InvalidArgument,
                message,
                ErrorDetails::with_error_info("MALFORMED_REQUEST", "waymark.dev", std::collections::HashMap::new()),
            )
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_string_field_that_is_not_utf8_is_invalid_argument() {
        // Field 1 (string), length 2, bytes that are not UTF-8.
        let bytes: &[u8] = &[0x0A, 0x02, 0xFF, 0xFE];
        let err = <crate::v1::GetWorkflowRequest as prost::Message>::decode(bytes).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }
}
