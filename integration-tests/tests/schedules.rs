//! Schedules end to end, with real server processes: a per-second schedule fired by two
//! replicas on one PostgreSQL starts one workflow per fire time and they all finish; a replica
//! killed -9 while firing leaves nothing half-done and the other keeps firing; the CLI manages
//! schedules and reports bad input with its reason, on SQLite and PostgreSQL.

use std::{collections::HashMap, time::Duration};

use waymark_integration_tests::{
    cli, fast_recovery_args, setup, side_effects, wait_for, wait_for_registration, Backend, ServerProcess,
    TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, ListOptions, ScheduleDef, WorkflowInfo, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

/// The fire time (Unix seconds) a scheduled workflow's id names.
fn fire_second(schedule: &str, workflow_id: &str) -> Option<i64> {
    let at = workflow_id.strip_prefix(&format!("schedule:{schedule}:"))?;
    chrono::DateTime::parse_from_rfc3339(at).ok().map(|t| t.timestamp())
}

/// The workflows schedule `name` fired, by fire time.
async fn fired(c: &Client, name: &str) -> Vec<(i64, WorkflowInfo)> {
    let (all, _) = c
        .list(ListOptions {
            workflow_name: Some("counted".into()),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut out: Vec<(i64, WorkflowInfo)> = all
        .into_iter()
        .filter_map(|w| fire_second(name, &w.workflow_id).map(|s| (s, w)))
        .collect();
    out.sort_by_key(|(s, _)| *s);
    out
}

/// Waits until at least `n` of the schedule's workflows fired after `after` (Unix seconds) have
/// finished, and returns every fired workflow.
async fn wait_for_fires(c: &Client, name: &str, after: i64, n: usize) -> Vec<(i64, WorkflowInfo)> {
    wait_for(&format!("{n} finished fires of {name:?}"), PATIENCE, || async {
        let all = fired(c, name).await;
        let done = all
            .iter()
            .filter(|(s, w)| *s > after && w.status == WorkflowStatus::Success)
            .count();
        (done >= n).then_some(all)
    })
    .await
}

/// Checks one schedule's fires: distinct whole seconds, each workflow's step run exactly once
/// (no fire started twice, nothing re-run), and the seconds from `from` on covered with at most
/// short gaps — a late scheduler skips missed seconds by design, a stuck or polling one leaves
/// long holes.
fn check_fires(fires: &[(i64, WorkflowInfo)], effects: &std::path::Path, from: i64) {
    let effects = side_effects::by_step(&side_effects::read(effects));
    let mut seen = HashMap::new();
    for (s, w) in fires {
        assert!(seen.insert(*s, &w.workflow_id).is_none(), "fire time {s} started twice");
        if w.status == WorkflowStatus::Success {
            let runs = effects.get(&(w.workflow_id.clone(), 0)).map_or(0, |e| e.len());
            assert_eq!(runs, 1, "the step of {} ran {runs} times", w.workflow_id);
        }
    }
    let seconds: Vec<i64> = fires.iter().map(|(s, _)| *s).filter(|s| *s >= from).collect();
    let (first, last) = (seconds[0], *seconds.last().unwrap());
    let longest_gap = seconds.windows(2).map(|p| p[1] - p[0]).max().unwrap_or(1);
    let covered = seconds.len() as f64 / (last - first + 1) as f64;
    assert!(
        longest_gap <= 5 && covered >= 0.7,
        "fires from {first} to {last}: longest gap {longest_gap}s, {:.0}% of seconds covered: {seconds:?}",
        covered * 100.0
    );
}

fn every_second() -> ScheduleDef {
    ScheduleDef {
        input: serde_json::json!({"steps": 1}),
        ..ScheduleDef::new("* * * * * *", "counted")
    }
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Two replicas race on every fire of a per-second schedule; the worker is attached to one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_start_one_workflow_per_fire_time() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let args = fast_recovery_args();
    let a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let effects = db.dir.join("effects.log");
    let _worker = WorkerProcess::start(&a.addr, &effects, 20, "on-a");
    let (via_a, via_b) = (a.client().await, b.client().await);
    wait_for_registration(&via_a, "counted").await;
    let start = now_secs();
    via_b.create_schedule("tick", &every_second()).await.unwrap();
    wait_for_fires(&via_a, "tick", start, 8).await;
    via_a.pause_schedule("tick").await.unwrap();
    // Every fired workflow finishes, including those still running at the pause.
    let fires = wait_for("every fired workflow to finish", PATIENCE, || async {
        let all = fired(&via_a, "tick").await;
        all.iter()
            .all(|(_, w)| w.status == WorkflowStatus::Success)
            .then_some(all)
    })
    .await;
    assert!(fires.len() >= 8);
    check_fires(&fires, &effects, start);
    let s = via_b.get_schedule("tick").await.unwrap();
    let last = fires.last().unwrap().0 * 1000;
    assert_eq!(s.last_fire_at_ms, Some(last), "the last fire is recorded");
    assert_eq!(s.next_fire_at_ms, None, "paused");
}

/// A replica is killed -9 while both fire a per-second schedule; the survivor fires on with no
/// duplicate and no hole, and the workflows the dead one started are run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_killed_replica_strands_no_fire() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let args = fast_recovery_args();
    let mut a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let effects = db.dir.join("effects.log");
    let _worker = WorkerProcess::start(&b.addr, &effects, 20, "on-b");
    let via_b = b.client().await;
    wait_for_registration(&via_b, "counted").await;
    let start = now_secs();
    a.client().await.create_schedule("tick", &every_second()).await.unwrap();
    wait_for_fires(&via_b, "tick", start, 3).await;
    a.kill();
    let killed_at = now_secs();
    let fires = wait_for_fires(&via_b, "tick", killed_at + 1, 5).await;
    check_fires(&fires, &effects, start);
    let s = via_b.get_schedule("tick").await.unwrap();
    assert!(
        s.next_fire_at_ms.unwrap() > s.last_fire_at_ms.unwrap(),
        "the schedule moved on: {s:?}"
    );
}

fn ok(server: &str, args: &[&str]) -> String {
    let (code, out, err) = cli(server, args);
    assert_eq!(code, 0, "waymark {args:?}: {err}");
    out
}

/// `waymark schedule …` refuses `args` with `reason` in its message and the exit code the CLI
/// documents for it (5 not found, 6 invalid input, else 1).
fn refused(server: &str, args: &[&str], reason: &str) {
    let (code, _, err) = cli(server, args);
    let expected = if reason.ends_with("NOT_FOUND") {
        5
    } else if reason.starts_with("INVALID_") {
        6
    } else {
        1
    };
    assert!(
        code == expected && err.contains(reason),
        "waymark {args:?}: expected {reason} (exit {expected}), got {code}: {err}"
    );
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn cli_manages_schedules(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let addr = s.server.addr.as_str();
    let create = [
        "schedule",
        "create",
        "nightly",
        "--cron",
        "0 30 3 * * *",
        "--timezone",
        "Europe/Berlin",
        "--workflow",
        "counted",
        "--input",
        r#"{"steps": 1}"#,
        "--json",
    ];
    let v = json(&ok(addr, &create));
    assert_eq!(
        (&v["name"], &v["timezone"], &v["queue_name"], &v["paused"]),
        (
            &serde_json::json!("nightly"),
            &serde_json::json!("Europe/Berlin"),
            &serde_json::json!("default"),
            &serde_json::json!(false)
        )
    );
    let next = v["next_fire_at_ms"].as_i64().expect("a next fire time");
    assert!(next > chrono::Utc::now().timestamp_millis());
    refused(addr, &create, "SCHEDULE_EXISTS");
    let list = ok(addr, &["schedule", "list"]);
    assert!(list.contains("nightly") && list.contains("0 30 3 * * *"), "{list}");

    let v = json(&ok(addr, &["schedule", "pause", "nightly", "--json"]));
    assert_eq!(
        (&v["paused"], &v["next_fire_at_ms"]),
        (&serde_json::json!(true), &serde_json::Value::Null)
    );
    let v = json(&ok(addr, &["schedule", "resume", "nightly", "--json"]));
    assert_eq!(
        (&v["paused"], v["next_fire_at_ms"].as_i64()),
        (&serde_json::json!(false), Some(next))
    );
    let v = json(&ok(
        addr,
        &["schedule", "update", "nightly", "--cron", "0 0 4 * * *", "--json"],
    ));
    assert_eq!(v["cron"], "0 0 4 * * *");
    assert_ne!(
        v["next_fire_at_ms"].as_i64(),
        Some(next),
        "a new cron moves the next fire"
    );

    // Trigger: one workflow now, which the worker runs.
    let id = ok(addr, &["schedule", "trigger", "nightly", "--request-id", "r1"]);
    let id = id.trim();
    assert_eq!(id, "schedule:nightly:trigger:r1");
    let w = s.client.await_workflow(id, Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (w.status, w.input),
        (WorkflowStatus::Success, serde_json::json!({"steps": 1}))
    );

    // Backfill the last three whole minutes of a per-minute schedule, twice.
    ok(
        addr,
        &[
            "schedule",
            "create",
            "minutely",
            "--cron",
            "* * * * *",
            "--workflow",
            "counted",
        ],
    );
    let minute = chrono::Utc::now().timestamp() / 60 * 60;
    let at = |m: i64| {
        chrono::DateTime::from_timestamp(minute - m * 60, 0)
            .unwrap()
            .to_rfc3339()
    };
    let backfill = [
        "schedule",
        "backfill",
        "minutely",
        "--from",
        &at(3),
        "--to",
        &at(1),
        "--json",
    ];
    let runs = json(&ok(addr, &backfill));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|r| r["created"] == true));
    assert_eq!(
        runs[0]["workflow_id"],
        format!("schedule:minutely:{}", at(3).replace("+00:00", "Z"))
    );
    let again = json(&ok(addr, &backfill));
    assert!(
        again.as_array().unwrap().iter().all(|r| r["created"] == false),
        "{again}"
    );
    let table = ok(
        addr,
        &["schedule", "backfill", "minutely", "--from", &at(3), "--to", &at(1)],
    );
    assert!(table.contains("existed"), "{table}");

    // Bad input, each with its reason.
    let create_bad = |cron: &str, extra: &[&str]| {
        let mut args = vec!["schedule", "create", "bad", "--workflow", "counted", "--cron"];
        args.push(cron);
        args.extend(extra);
        args.into_iter().map(String::from).collect::<Vec<String>>()
    };
    for (args, reason) in [
        (create_bad("61 * * * *", &[]), "INVALID_CRON"),
        (
            create_bad("* * * * *", &["--timezone", "Mars/Olympus_Mons"]),
            "INVALID_TIMEZONE",
        ),
        (create_bad("* * * * *", &["--queue", "nowhere"]), "QUEUE_NOT_FOUND"),
    ] {
        refused(addr, &args.iter().map(String::as_str).collect::<Vec<_>>(), reason);
    }
    refused(
        addr,
        &[
            "schedule",
            "create",
            "a b",
            "--cron",
            "* * * * *",
            "--workflow",
            "counted",
        ],
        "INVALID_ARGUMENT",
    );
    refused(
        addr,
        &[
            "schedule",
            "backfill",
            "minutely",
            "--from",
            &at(1),
            "--to",
            "2999-01-01T00:00:00Z",
        ],
        "INVALID_ARGUMENT",
    );
    refused(addr, &["schedule", "trigger", "nope"], "SCHEDULE_NOT_FOUND");

    ok(addr, &["schedule", "delete", "nightly"]);
    refused(addr, &["schedule", "get", "nightly"], "SCHEDULE_NOT_FOUND");
    refused(addr, &["schedule", "delete", "nightly"], "SCHEDULE_NOT_FOUND");
    assert_eq!(
        s.client.get(id).await.unwrap().status,
        WorkflowStatus::Success,
        "deleting the schedule left its workflow"
    );
}

/// The service is announced by reflection, so grpcurl finds it with no proto files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_schedule_service() {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let Some(db) = TestDatabase::new(Backend::Sqlite).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut resp = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<String> = match resp.message().await.unwrap().unwrap().message_response {
        Some(MessageResponse::ListServicesResponse(l)) => l.service.into_iter().map(|s| s.name).collect(),
        other => panic!("unexpected reflection answer {other:?}"),
    };
    assert!(names.contains(&"waymark.v1.ScheduleService".to_string()), "{names:?}");
}

waymark_integration_tests::on_both_stores!(cli_manages_schedules);
