//! `waymark health`: asks a server's ops listener (`--metrics-listen`) whether it is alive or
//! ready, for a container's HEALTHCHECK or a script. Plain HTTP on that port needs no key and
//! no TLS, and the image carries no other HTTP client.

use std::time::Duration;

use clap::Args;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Args, Debug)]
pub struct HealthArgs {
    /// The server's --metrics-listen address; 0.0.0.0 and [::] mean this host.
    #[arg(long, env = "WAYMARK_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    pub metrics_listen: String,
    /// Ask whether it can do work (`/readyz`) rather than whether it runs (`/healthz`).
    #[arg(long)]
    pub ready: bool,
    /// Give up after this long.
    #[arg(long, default_value = "5s", value_parser = waymark_server::duration::parse_duration)]
    pub timeout: Duration,
}

/// Exit 0 when the server answers 200, 1 (saying what it answered) otherwise.
pub async fn run(args: HealthArgs) -> anyhow::Result<i32> {
    let addr = args
        .metrics_listen
        .replace("0.0.0.0:", "127.0.0.1:")
        .replace("[::]:", "[::1]:");
    let path = if args.ready { "/readyz" } else { "/healthz" };
    let asked = tokio::time::timeout(args.timeout, get(&addr, path)).await;
    let (status, body) = match asked {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            println!("no answer from {addr}: {e}");
            return Ok(1);
        }
        Err(_) => {
            println!("no answer from {addr} within {:?}", args.timeout);
            return Ok(1);
        }
    };
    print!("{body}");
    Ok(if status == 200 { 0 } else { 1 })
}

/// One GET over a fresh connection: the status code and the body.
async fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    // The answers are a line or two; a bound keeps a confused peer from feeding us forever.
    stream.take(64 * 1024).read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    Ok((status, body.to_string()))
}
