//! Queues as server resources, with real processes on SQLite and PostgreSQL: create, read,
//! update only what is named, list, delete; bad limits, unknown and protected queues; starts on
//! unknown queues refused; the CLI.

use std::time::Duration;

use waymark_integration_tests::{cli, setup, Backend};
use waymark_sdk::{Error, QueueLimits, QueueUpdate, StartOptions};

fn reason(r: Result<impl std::fmt::Debug, Error>) -> (tonic::Code, String) {
    match r {
        Err(Error::Rpc { code, reason, .. }) => (code, reason),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn queues_are_managed_and_checked(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let limits = QueueLimits {
        worker_concurrency: Some(2),
        global_concurrency: Some(5),
        rate_limit: Some((10, Duration::from_secs(1))),
        partition_concurrency: None,
    };
    let created = c.create_queue("orders", &limits).await.unwrap();
    assert_eq!((created.name.as_str(), &created.limits), ("orders", &limits));
    assert_eq!(c.get_queue("orders").await.unwrap().limits, limits);
    let updated = c
        .update_queue(
            "orders",
            &QueueUpdate {
                global_concurrency: Some(None),
                partition_concurrency: Some(Some(1)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        updated.limits,
        QueueLimits {
            global_concurrency: None,
            partition_concurrency: Some(1),
            ..limits.clone()
        }
    );
    let names: Vec<String> = c.list_queues().await.unwrap().into_iter().map(|q| q.name).collect();
    assert_eq!(names, ["default", "orders"]);
    // Starts: on a queue that exists (nobody serves it yet: it waits), not on one that does not.
    let w = c
        .start_json(
            "echo",
            serde_json::json!(1),
            StartOptions {
                queue: Some("orders".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(w.workflow.queue_name, "orders");
    let unknown = c
        .start_json(
            "echo",
            serde_json::json!(1),
            StartOptions {
                queue: Some("nowhere".into()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(reason(unknown), (tonic::Code::NotFound, "QUEUE_NOT_FOUND".into()));
    // Bad input and refusals.
    let zero = QueueLimits {
        worker_concurrency: Some(0),
        ..Default::default()
    };
    assert_eq!(
        reason(c.create_queue("zero", &zero).await),
        (tonic::Code::InvalidArgument, "INVALID_ARGUMENT".into())
    );
    let no_period = QueueLimits {
        rate_limit: Some((10, Duration::ZERO)),
        ..Default::default()
    };
    assert_eq!(
        reason(c.create_queue("fast", &no_period).await),
        (tonic::Code::InvalidArgument, "INVALID_ARGUMENT".into())
    );
    assert_eq!(
        reason(c.create_queue("orders", &QueueLimits::default()).await),
        (tonic::Code::AlreadyExists, "QUEUE_EXISTS".into())
    );
    assert_eq!(
        reason(c.get_queue("nowhere").await),
        (tonic::Code::NotFound, "QUEUE_NOT_FOUND".into())
    );
    assert_eq!(
        reason(
            c.update_queue(
                "nowhere",
                &QueueUpdate {
                    worker_concurrency: Some(Some(1)),
                    ..Default::default()
                }
            )
            .await
        ),
        (tonic::Code::NotFound, "QUEUE_NOT_FOUND".into())
    );
    assert_eq!(
        reason(c.delete_queue("default").await),
        (tonic::Code::FailedPrecondition, "QUEUE_PROTECTED".into())
    );
    c.delete_queue("orders").await.unwrap();
    assert_eq!(
        reason(c.delete_queue("orders").await),
        (tonic::Code::NotFound, "QUEUE_NOT_FOUND".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_manages_queues() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let addr = &s.server.addr;
    let (code, out, err) = cli(
        addr,
        &[
            "queue",
            "create",
            "emails",
            "--worker-concurrency",
            "2",
            "--rate-limit",
            "10",
            "--rate-period",
            "1s",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("emails") && out.contains("10/1s"), "{out}");
    let (code, out, _) = cli(
        addr,
        &[
            "queue",
            "update",
            "emails",
            "--global-concurrency",
            "5",
            "--clear",
            "rate-limit",
        ],
    );
    assert_eq!(code, 0);
    let (code, out2, _) = cli(addr, &["queue", "get", "emails", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out2).unwrap();
    assert_eq!(
        (
            &v["limits"]["worker_concurrency"],
            &v["limits"]["global_concurrency"],
            &v["limits"]["rate_limit"]
        ),
        (&serde_json::json!(2), &serde_json::json!(5), &serde_json::Value::Null)
    );
    let (code, out, _) = cli(addr, &["queue", "list"]);
    assert!(code == 0 && out.contains("default") && out.contains("emails"), "{out}");
    let (code, _, err) = cli(addr, &["queue", "create", "bad", "--global-concurrency", "0"]);
    assert!(
        code == 6 && err.contains("at least 1"),
        "invalid input exits 6: {code} {err}"
    );
    let (code, _, err) = cli(addr, &["queue", "create", "bad", "--rate-limit", "5"]);
    assert!(code == 2 && err.contains("--rate-period"), "{err}");
    // A start on it, with a priority (nothing serves the queue: it waits, ENQUEUED).
    let (code, out, err) = cli(
        addr,
        &[
            "workflow",
            "start",
            "echo",
            "--queue",
            "emails",
            "--priority",
            "-2",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["workflow"]["priority"], &v["workflow"]["queue_name"]),
        (&serde_json::json!(-2), &serde_json::json!("emails"))
    );
    let (code, _, _) = cli(addr, &["queue", "delete", "emails"]);
    assert_eq!(code, 0);
    let (code, _, err) = cli(addr, &["queue", "get", "emails"]);
    assert!(
        code == 5 && err.contains("does not exist"),
        "not found exits 5: {code} {err}"
    );
}

waymark_integration_tests::on_both_stores!(queues_are_managed_and_checked);
