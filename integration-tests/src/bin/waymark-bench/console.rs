//! What an open console costs the gRPC path: the throughput and latency workloads again on a
//! second server while a console's list page is open against it — every second, the first page
//! of workflows, the default queue and the workers, over gRPC-web on the console's port, as the
//! browser asks them. The plain server has its console on and idle.

use std::time::Duration;

use waymark_integration_tests::{grpc_web::grpc_web, Backend, ServerProcess, TestDatabase};
use waymark_proto::v1;

use crate::{variant::Variant, Args};

/// One refresh of the list page; how many calls were answered.
async fn refresh(port: u16) -> usize {
    let mut answered = 0;
    let list = v1::ListWorkflowsRequest {
        page_size: 50,
        ..Default::default()
    };
    if let waymark_integration_tests::grpc_web::Answer::Ok(_) = grpc_web(
        port,
        "/waymark.v1.WorkflowService/ListWorkflows",
        &list,
        &[],
        "127.0.0.1",
    )
    .await
    {
        answered += 1;
    }
    let queue = v1::GetQueueRequest { name: "default".into() };
    if let waymark_integration_tests::grpc_web::Answer::Ok(_) =
        grpc_web(port, "/waymark.v1.QueueService/GetQueue", &queue, &[], "127.0.0.1").await
    {
        answered += 1;
    }
    let workers = v1::ListWorkersRequest::default();
    if let waymark_integration_tests::grpc_web::Answer::Ok(_) = grpc_web(
        port,
        "/waymark.v1.WorkerService/ListWorkers",
        &workers,
        &[],
        "127.0.0.1",
    )
    .await
    {
        answered += 1;
    }
    answered
}

pub async fn run(args: &Args, backend: Backend) -> anyhow::Result<Variant> {
    let db = TestDatabase::new(backend)
        .await
        .ok_or_else(|| anyhow::anyhow!("no database"))?;
    let mut server = ServerProcess::start(&db, &[]).await;
    let url = waymark_sdk::Client::connect_with(&server.connect)
        .await?
        .who_am_i()
        .await?
        .console_url
        .ok_or_else(|| anyhow::anyhow!("the server has no console"))?;
    let port: u16 = url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .parse()?;
    let poller = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        let mut answered = 0usize;
        loop {
            every.tick().await;
            answered += refresh(port).await;
            if answered > 0 && answered.is_multiple_of(90) {
                eprintln!("[console] {answered} console calls answered");
            }
        }
    });
    let connect = server.connect.clone();
    let measured = crate::variant::measure(args, &connect, &connect).await;
    poller.abort();
    server.terminate();
    let (steps_per_s, p50_ms, p99_ms) = measured?;
    Ok(Variant {
        label: "with a console's list page open (refreshed every second over gRPC-web)",
        key: "console",
        steps_per_s,
        p50_ms,
        p99_ms,
        note: String::new(),
        flood: None,
    })
}
