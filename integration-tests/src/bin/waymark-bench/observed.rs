//! What observability costs: the throughput and latency workloads again on a second server
//! (fresh database of the same backend) that exports every span over OTLP to a receiver in this
//! process and has its metrics scraped every second — printed beside the plain figures of the
//! same run. (The plain server exports nothing and is not scraped: the figures with export off.)

use std::time::Duration;

use waymark_integration_tests::{free_port, otlp::OtlpReceiver, Backend, ServerProcess, TestDatabase};

use crate::{variant::Variant, Args};

/// One scrape of `/metrics`; its size in bytes.
async fn scrape(port: u16) -> anyhow::Result<usize> {
    let (status, body) = waymark_integration_tests::http_get(port, "/metrics").await?;
    anyhow::ensure!(status == 200, "the scrape was refused ({status})");
    Ok(body.len())
}

pub async fn run(args: &Args, backend: Backend) -> anyhow::Result<Variant> {
    let db = TestDatabase::new(backend)
        .await
        .ok_or_else(|| anyhow::anyhow!("no database"))?;
    let receiver = OtlpReceiver::start().await;
    let port = free_port();
    let flags = [
        "--otlp-endpoint".to_string(),
        receiver.endpoint(),
        "--metrics-listen".into(),
        format!("127.0.0.1:{port}"),
    ];
    let mut server = ServerProcess::start(&db, &flags).await;
    let scraper = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        let (mut scrapes, mut bytes) = (0u64, 0usize);
        loop {
            every.tick().await;
            match scrape(port).await {
                Ok(n) => {
                    scrapes += 1;
                    bytes = n;
                }
                Err(e) => eprintln!("[observed] scrape failed: {e}"),
            }
            if scrapes > 0 && scrapes.is_multiple_of(30) {
                eprintln!("[observed] {scrapes} scrapes, the last {bytes} bytes");
            }
        }
    });
    let connect = server.connect.clone();
    let measured = crate::variant::measure(args, &connect, &connect).await;
    scraper.abort();
    server.terminate();
    let (steps_per_s, p50_ms, p99_ms) = measured?;
    Ok(Variant {
        label: "with traces exported and metrics scraped every second",
        key: "observed",
        steps_per_s,
        p50_ms,
        p99_ms,
        note: format!("{} spans received", receiver.spans().len()),
        flood: None,
    })
}
