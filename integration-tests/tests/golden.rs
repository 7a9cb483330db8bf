//! Golden histories (`contract/histories/`), the cross-SDK contract for replay. Each file holds
//! a workflow's recorded history and what replaying it must come to; every SDK's suite replays
//! them offline against its own copy of the golden workflows (`src/golden.rs` specifies them).
//!
//! - `every_golden_history_replays_offline`: the Rust SDK's `Replayer` reaches each file's
//!   expected outcome, with no server.
//! - `golden_histories_come_from_real_runs`: runs each golden workflow on a real server and
//!   checks its history is the committed one (times, UUIDs and message ids aside). With
//!   `WAYMARK_WRITE_GOLDEN=1` it writes the files instead (`make golden`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use waymark_integration_tests::{golden, wait_for_registration, Backend, ServerProcess, TestDatabase, WorkerProcess};
use waymark_sdk::{RecordedHistory, Replayed, StartOptions, Worker, WorkflowError};

/// One golden file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Golden {
    about: String,
    history: RecordedHistory,
    expect: Expect,
}

/// What replaying a history must come to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Expect {
    /// The workflow returns this.
    Returned(Value),
    /// The workflow fails with this kind (e.g. NonDeterminism).
    Failed(String),
    /// The history ends: the code calls at this position, which it does not record.
    SuspendedAt(u32),
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../contract/histories")
}

fn committed() -> Vec<(String, Golden)> {
    let mut out: Vec<(String, Golden)> = std::fs::read_dir(dir())
        .expect("contract/histories")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let g: Golden = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_stem().unwrap().to_string_lossy().into_owned(), g)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn kind(e: &WorkflowError) -> String {
    match e {
        WorkflowError::NonDeterminism(_) => "NonDeterminism".into(),
        WorkflowError::Step { .. } => "StepFailed".into(),
        WorkflowError::Failed { kind, .. } => kind.clone(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn every_golden_history_replays_offline() {
    let worker = golden::register(Worker::builder()).build();
    let replayer = worker.replayer();
    let all = committed();
    assert!(all.len() >= 10, "the golden histories are there: {}", all.len());
    for (name, g) in all {
        let got = replayer.replay(&g.history).await.unwrap();
        let got = match got {
            Replayed::Returned(v) => Expect::Returned(v),
            Replayed::Failed(e) => Expect::Failed(kind(&e)),
            Replayed::Suspended { step_id } => Expect::SuspendedAt(step_id),
            Replayed::ContinuedAsNew(v) => {
                panic!("{name}: no golden history continues as new, yet it replayed to that ({v})")
            }
        };
        assert_eq!(got, g.expect, "{name}: {}", g.about);
    }
}

/// The golden workflows run live, and what each scenario says about it. golden.remote comes
/// before the others that call its remote step, whose attempts it counts.
const LIVE: [(&str, &str, &str); 11] = [
    (
        "steps",
        "golden.steps",
        "A step's result and a step's failure, caught by the workflow.",
    ),
    (
        "sleep",
        "golden.sleep",
        "A durable sleep: its wake time is recorded before it starts.",
    ),
    (
        "messages",
        "golden.messages",
        "A send (recorded by the server), a receive that gets it, and one that times out (a recorded null).",
    ),
    ("events", "golden.events", "An event set, and read back by a workflow."),
    (
        "stream",
        "golden.stream",
        "Two stream writes and a close, each recorded with its offset.",
    ),
    (
        "child",
        "golden.child",
        "A child started and awaited: its id, then how it ended.",
    ),
    (
        "remote_retry",
        "golden.remote",
        "A remote step whose first attempt fails and second succeeds: only its result is recorded, under its own name.",
    ),
    ("drawn", "golden.drawn", "The time and a UUID, drawn once and recorded."),
    (
        "patched",
        "golden.patched",
        "A code change asked about with patched: a run of the new code records the marker, then the new branch's step.",
    ),
    (
        "select",
        "golden.select",
        "A wait for the first of a remote step and a child: the index of the one that finished first is recorded (waymark.select), so a replay takes the same branch.",
    ),
    (
        "wait_all",
        "golden.wait_all",
        "A wait for all of a child and a remote step: the index of the last to finish is recorded (waymark.wait_all).",
    ),
];

/// The histories the live runs lead to, with the derived ones: a replay of changed code, and a
/// recovery in the middle of a wait.
fn with_derived(live: Vec<(String, Golden)>) -> Vec<(String, Golden)> {
    let mut all = live.clone();
    let find = |n: &str| live.iter().find(|(name, _)| name == n).unwrap().1.clone();
    let mut nd = find("steps");
    nd.about = "golden.steps's history, where the code now calls \"add\" at a position that records \"add-v0\": non-determinism.".into();
    nd.history.steps[0].name = "add-v0".into();
    nd.expect = Expect::Failed("NonDeterminism".into());
    all.push(("non_determinism".into(), nd));
    let mut mid = find("messages");
    mid.about = "golden.messages's history cut inside its first receive (its deadline recorded, its result not yet): a recovery mid-wait goes on by asking for the result.".into();
    mid.history.steps.truncate(2);
    mid.expect = Expect::SuspendedAt(2);
    all.push(("recovery_mid_wait".into(), mid));
    let mut old = find("patched");
    old.about = "golden.patched's history as code without the change made it (step \"unfixed\" where the marker would be): patched answers false, takes no position, and the old branch replays.".into();
    old.history.steps.remove(0);
    let unfixed = &mut old.history.steps[0];
    (unfixed.step_id, unfixed.name, unfixed.output) = (0, "unfixed".into(), Some(json!("old")));
    old.expect = Expect::Returned(json!({ "branch": "old" }));
    all.push(("patched_old".into(), old));
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Values that differ from run to run, blanked for comparison.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let blank = match k.as_str() {
                        "wake_at_ms" | "deadline_ms" | "now_ms" => Some(json!(0)),
                        "uuid" | "message_id" => Some(json!("")),
                        _ => None,
                    };
                    (k.clone(), blank.unwrap_or_else(|| normalized(v)))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

/// A cancelled run: golden.child whose child was cancelled before it ran. The child's id is
/// derived from its parent's, so the child is started first (delayed, so no worker takes it)
/// and cancelled; the parent's start then joins it, and its await records how it ended.
async fn cancelled_child(client: &waymark_sdk::Client) -> Golden {
    let id = "golden-cancelled_child";
    let child = StartOptions {
        delay: Some(std::time::Duration::from_secs(3600)),
        ..StartOptions::id(format!("{id}/child-0"))
    };
    client
        .start_json("golden.child_body", json!({ "n": 3 }), child)
        .await
        .unwrap();
    client.cancel(&format!("{id}/child-0")).await.unwrap();
    let input = json!({ "n": 41 });
    client
        .start_json("golden.child", input.clone(), StartOptions::id(id))
        .await
        .unwrap();
    let done = client
        .await_workflow(id, Some(std::time::Duration::from_secs(120)))
        .await
        .unwrap();
    let failure = done
        .failure
        .clone()
        .unwrap_or_else(|| panic!("the parent of a cancelled child did not fail: {done:?}"));
    Golden {
        about: "golden.child, whose child was cancelled before it finished: the await records how the child ended (CANCELLED), and the parent fails with ChildCancelled.".into(),
        history: client.history(id).await.unwrap(),
        expect: Expect::Failed(failure.kind),
    }
}

/// golden.update answering one update a client sent (id "golden-update-1", args `{"n": 41}`).
async fn update(client: &waymark_sdk::Client) -> Golden {
    let id = "golden-update";
    client
        .start_json("golden.update", json!({}), StartOptions::id(id))
        .await
        .unwrap();
    let options = waymark_sdk::UpdateOptions {
        update_id: Some("golden-update-1".into()),
        timeout: Some(std::time::Duration::from_secs(120)),
    };
    let answer: Value = client
        .update_workflow(id, "add", &json!({ "n": 41 }), options)
        .await
        .unwrap();
    assert_eq!(answer, json!({ "total": 42 }));
    let done = client
        .await_workflow(id, Some(std::time::Duration::from_secs(120)))
        .await
        .unwrap();
    Golden {
        about: "An update a client sent, taken (a receive on topic waymark.update/add of {update_id, args}), handled by a step, and answered (the event waymark.update/<update id>).".into(),
        history: client.history(id).await.unwrap(),
        expect: Expect::Returned(done.output.expect("golden.update succeeds")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_histories_come_from_real_runs() {
    let Some(db) = TestDatabase::new(Backend::Sqlite).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let _worker = WorkerProcess::start_with_env(&server.addr, &log, 10, "golden", &[("WAYMARK_ROLE", "golden")]);
    wait_for_registration(&client, "golden.drawn").await;
    let mut live = Vec::new();
    for (name, workflow, about) in LIVE {
        let id = format!("golden-{name}");
        let input = json!({ "n": 41 });
        client
            .start_json(workflow, input.clone(), StartOptions::id(&id))
            .await
            .unwrap();
        let done = client
            .await_workflow(&id, Some(std::time::Duration::from_secs(120)))
            .await
            .unwrap();
        let output = done
            .output
            .clone()
            .unwrap_or_else(|| panic!("{name} did not succeed: {done:?}"));
        let history = client.history(&id).await.unwrap();
        assert_eq!((history.workflow_name.as_str(), &history.input), (workflow, &input));
        let g = Golden {
            about: about.into(),
            history,
            expect: Expect::Returned(output),
        };
        live.push((name.to_string(), g));
    }
    live.push(("cancelled_child".into(), cancelled_child(&client).await));
    live.push(("update".into(), update(&client).await));
    let all = with_derived(live);
    if std::env::var("WAYMARK_WRITE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(dir()).unwrap();
        for (name, g) in &all {
            let text = serde_json::to_string_pretty(g).unwrap() + "\n";
            std::fs::write(dir().join(format!("{name}.json")), text).unwrap();
        }
        return;
    }
    let committed = committed();
    assert_eq!(
        committed.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        all.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "the committed golden histories are the ones the live runs lead to (make golden writes them)"
    );
    for ((name, _), (_, got)) in committed.iter().zip(&all) {
        // The file as written, not as parsed: a recorded null output must stay a null.
        let text = std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap();
        let want: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            normalized(&want),
            normalized(&serde_json::to_value(got).unwrap()),
            "{name}: a live run no longer records the committed history (make golden writes it again)"
        );
    }
}
