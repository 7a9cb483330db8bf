//! A gRPC-web client as small as a test needs: one unary call over HTTP/1.1 on a local port,
//! framed as a browser's gRPC-web library frames it (`application/grpc-web+proto`), the answer's
//! status and `ErrorInfo` reason read from its trailers. The console's tests and the bench's
//! console workload use it; the console itself uses Connect's gRPC-web transport.

use prost::Message;

/// What a gRPC-web call answered: the message, or the status code and ErrorInfo reason.
#[derive(Debug)]
pub enum Answer {
    Ok(bytes::Bytes),
    Err { code: i32, reason: String },
}

impl Answer {
    pub fn ok<M: Message + Default>(self) -> M {
        match self {
            Answer::Ok(b) => M::decode(b).unwrap(),
            e => panic!("expected an answer, got {e:?}"),
        }
    }

    pub fn reason(&self) -> (i32, &str) {
        match self {
            Answer::Err { code, reason, .. } => (*code, reason.as_str()),
            Answer::Ok(_) => panic!("expected a refusal, got an answer"),
        }
    }
}

/// An HTTP/1.1 exchange on a local port: status, headers (lower-case names) and body, chunked
/// bodies joined.
pub async fn http(port: u16, request: Vec<u8>) -> (u16, Vec<(String, String)>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(&request).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v == "chunked") {
        let mut joined = Vec::new();
        let mut rest = &body[..];
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            joined.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
            rest = &rest[eol + 2 + size + 2..];
        }
        body = joined;
    }
    (status, headers, body)
}

/// A unary call over gRPC-web, as the console's browser code makes it.
pub async fn grpc_web(port: u16, method: &str, msg: &impl Message, headers: &[(&str, &str)], host: &str) -> Answer {
    let payload = msg.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    framed.extend_from_slice(&payload);
    let mut req = format!(
        "POST {method} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        framed.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(&framed);
    let (status, head, body) = http(port, bytes).await;
    assert_eq!(
        status, 200,
        "gRPC-web answers HTTP 200 with the status inside: {head:?}"
    );
    // Frames: 0x00 = a message, 0x80 = the trailers as text. A trailers-only answer has its
    // status in the HTTP headers.
    let mut message = None;
    let mut trailers = head.clone();
    let mut rest = &body[..];
    while rest.len() >= 5 {
        let len = u32::from_be_bytes(rest[1..5].try_into().unwrap()) as usize;
        let data = &rest[5..5 + len];
        if rest[0] & 0x80 == 0 {
            message = Some(bytes::Bytes::copy_from_slice(data));
        } else {
            for line in String::from_utf8_lossy(data).split("\r\n") {
                if let Some((k, v)) = line.split_once(':') {
                    trailers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
        }
        rest = &rest[5 + len..];
    }
    let mut map = http::HeaderMap::new();
    for (k, v) in &trailers {
        if let (Ok(k), Ok(v)) = (
            http::header::HeaderName::from_bytes(k.as_bytes()),
            http::HeaderValue::from_str(v),
        ) {
            map.append(k, v);
        }
    }
    let status = tonic::Status::from_header_map(&map).expect("a grpc-status");
    if status.code() == tonic::Code::Ok {
        return Answer::Ok(message.expect("a message"));
    }
    use tonic_types::StatusExt;
    let reason = status.get_details_error_info().map(|i| i.reason).unwrap_or_default();
    Answer::Err {
        code: status.code() as i32,
        reason,
    }
}
