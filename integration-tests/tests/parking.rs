//! Parking with real processes, on SQLite and PostgreSQL: workflows that wait long are released
//! from their worker, hold no slot, and come back when their wait resolves.

use std::time::Duration;

use waymark_integration_tests::{
    fast_recovery_args, wait_for, wait_for_registration, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, ListOptions, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(600);

async fn count(client: &Client, status: WorkflowStatus, name: &str) -> usize {
    let mut n = 0;
    let mut token = None;
    loop {
        let options = ListOptions {
            statuses: vec![status],
            workflow_name: Some(name.into()),
            page_size: 1000,
            page_token: token,
            ..Default::default()
        };
        let (page, next) = client.list(options).await.expect("list");
        n += page.len();
        match next {
            Some(t) => token = Some(t),
            None => return n,
        }
    }
}

/// True when no `inbox` workflow is in any of these statuses.
async fn none_in(client: &Client, statuses: &[WorkflowStatus]) -> bool {
    let options = ListOptions {
        statuses: statuses.to_vec(),
        workflow_name: Some("inbox".into()),
        page_size: 1,
        ..Default::default()
    };
    client
        .list(options)
        .await
        .map(|(page, _)| page.is_empty())
        .unwrap_or(false)
}

/// A server and one worker with room for `capacity` that parks every wait longer than 100 ms
/// (and registers remote steps too). Keep the result alive for the test: it owns the processes.
struct Parking {
    _db: TestDatabase,
    _server: ServerProcess,
    client: Client,
    _worker: WorkerProcess,
}

async fn parking_worker(backend: Backend, capacity: u32) -> Option<Parking> {
    let db = TestDatabase::new(backend).await?;
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let worker = WorkerProcess::start_with_env(
        &server.addr,
        &db.dir.join("effects.log"),
        capacity,
        "parker",
        &[("WAYMARK_PARK_AFTER_MS", "100"), ("WAYMARK_ROLE", "all")],
    );
    wait_for_registration(&client, "counted").await;
    Some(Parking {
        _db: db,
        _server: server,
        client,
        _worker: worker,
    })
}

/// `n` workflows waiting an hour each, served by one worker with room for `capacity`: only
/// parking lets them all reach their wait. Then a message to each finishes them all.
async fn many_parked_workflows_share_a_few_slots(backend: Backend, n: usize, capacity: u32) {
    let Some(p) = parking_worker(backend, capacity).await else {
        return;
    };
    let client = &p.client;
    use futures::StreamExt;
    let started: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move {
                c.start_json(
                    "inbox",
                    serde_json::json!({"timeout_ms": 3_600_000}),
                    StartOptions::id(format!("p{i}")),
                )
                .await
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(started.iter().all(|r| r.is_ok()), "every start succeeded");
    // Cheap to poll: none left running or queued means all are parked.
    wait_for(&format!("all {n} workflows to park"), PATIENCE, || async {
        none_in(client, &[WorkflowStatus::Enqueued, WorkflowStatus::Pending])
            .await
            .then_some(())
    })
    .await;
    assert_eq!(count(client, WorkflowStatus::Delayed, "inbox").await, n);
    let sent: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move { c.send_message(&format!("p{i}"), "", &i, None).await }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(sent.iter().all(|r| r.is_ok()), "every send succeeded");
    wait_for(&format!("all {n} workflows to finish"), PATIENCE, || async {
        none_in(
            client,
            &[
                WorkflowStatus::Enqueued,
                WorkflowStatus::Pending,
                WorkflowStatus::Delayed,
            ],
        )
        .await
        .then_some(())
    })
    .await;
    assert_eq!(count(client, WorkflowStatus::Success, "inbox").await, n);
    for i in [0, n / 2, n - 1] {
        let w = client.get(&format!("p{i}")).await.unwrap();
        assert_eq!(w.output, Some(serde_json::json!({"received": [i]})), "p{i}");
        assert!(w.epoch >= 2, "p{i} was dispatched again after parking");
    }
}

async fn a_parked_sleep_wakes_on_time(backend: Backend) {
    let Some(p) = parking_worker(backend, 1).await else {
        return;
    };
    let client = &p.client;
    client
        .start_json("napper", serde_json::json!({"ms": 1500}), StartOptions::id("nap"))
        .await
        .unwrap();
    wait_for("the sleeper to park", PATIENCE, || async {
        client
            .get("nap")
            .await
            .ok()
            .filter(|w| w.status == WorkflowStatus::Delayed)
    })
    .await;
    // Its slot is free while it sleeps: another workflow runs on the one-slot worker meanwhile.
    client
        .start_json("echo", serde_json::json!("meanwhile"), StartOptions::id("other"))
        .await
        .unwrap();
    let other = client.await_workflow("other", Some(PATIENCE)).await.unwrap();
    assert_eq!(other.status, WorkflowStatus::Success);
    let nap = client.await_workflow("nap", Some(PATIENCE)).await.unwrap();
    let steps = client.steps("nap").await.unwrap();
    let wake_at = steps[0].output.as_ref().unwrap()["wake_at_ms"].as_i64().unwrap();
    assert!(
        nap.output.unwrap().as_i64().unwrap() >= wake_at,
        "woke no earlier than recorded"
    );
    assert!(nap.epoch >= 2);
}

/// A parent awaiting a child (and a caller awaiting a remote step) that takes long is parked on
/// a one-slot worker, and comes back when the child finishes / the result is recorded.
async fn long_awaits_park_and_come_back(backend: Backend) {
    let Some(p) = parking_worker(backend, 1).await else {
        return;
    };
    let client = &p.client;
    let parked = |id: &'static str| {
        let client = client.clone();
        async move {
            wait_for(&format!("{id} to park"), PATIENCE, || async {
                client
                    .get(id)
                    .await
                    .ok()
                    .filter(|w| w.status == WorkflowStatus::Delayed)
            })
            .await
        }
    };
    // The child waits for a message; with one slot, the parent must have let go for the child to
    // run at all.
    client
        .start_json(
            "family",
            serde_json::json!({"children": [["inbox", {"topic": "go", "timeout_ms": 3_600_000}]]}),
            StartOptions::id("fam"),
        )
        .await
        .unwrap();
    parked("fam").await;
    parked("fam/child-0").await;
    client.send_message("fam/child-0", "go", &"now", None).await.unwrap();
    let fam = client.await_workflow("fam", Some(PATIENCE)).await.unwrap();
    assert_eq!(fam.output, Some(serde_json::json!([{"received": ["now"]}])));
    // A remote step that runs a while (on this same process, whose step credits are apart from
    // its one workflow slot): the caller parks until the result is recorded.
    client
        .start_json(
            "caller",
            serde_json::json!({"step": "double", "input": {"n": 4, "ms": 1_500, "key": "p"}}),
            StartOptions::id("slow-call"),
        )
        .await
        .unwrap();
    parked("slow-call").await;
    let call = client.await_workflow("slow-call", Some(PATIENCE)).await.unwrap();
    assert_eq!(call.output, Some(serde_json::json!(8)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_long_awaits_park_and_come_back() {
    long_awaits_park_and_come_back(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_long_awaits_park_and_come_back() {
    long_awaits_park_and_come_back(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_parked_workflows_free_their_slots() {
    many_parked_workflows_share_a_few_slots(Backend::Sqlite, 40, 2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_parked_workflows_free_their_slots() {
    many_parked_workflows_share_a_few_slots(Backend::Postgres, 40, 2).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ten_thousand_parked_workflows_on_ten_slots() {
    many_parked_workflows_share_a_few_slots(Backend::Sqlite, 10_000, 10).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_ten_thousand_parked_workflows_on_ten_slots() {
    many_parked_workflows_share_a_few_slots(Backend::Postgres, 10_000, 10).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_parked_sleep_wakes_on_time() {
    a_parked_sleep_wakes_on_time(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_parked_sleep_wakes_on_time() {
    a_parked_sleep_wakes_on_time(Backend::Postgres).await
}
