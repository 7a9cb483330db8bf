//! The client API and the CLI against a real server process, on SQLite and PostgreSQL: idempotent
//! starts, bad input with stable error reasons, await deadlines, cancel and resume, retries,
//! reflection and health, and a clean drain on SIGTERM.

use std::time::Duration;

use waymark_integration_tests::{setup, side_effects, wait_for, waymark_bin, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{Error, ListOptions, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn reason(e: &Error) -> &str {
    e.reason().unwrap_or("<no reason>")
}

fn assert_safe(e: &Error) {
    let text = e.to_string().to_lowercase();
    for leak in ["select ", "insert ", "sqlx", "postgres", "sqlite", "panicked"] {
        assert!(!text.contains(leak), "error leaks internals: {e}");
    }
}

async fn starts_are_idempotent(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let first = s
        .client
        .start_json("echo", serde_json::json!({"a": 1}), StartOptions::id("order-1"))
        .await
        .unwrap();
    let again = s
        .client
        .start_json("echo", serde_json::json!({"a": 2}), StartOptions::id("order-1"))
        .await
        .unwrap();
    assert!(first.created && !again.created);
    assert_eq!(
        again.workflow.input,
        serde_json::json!({"a": 1}),
        "the second start returns the first workflow"
    );
    let done = s.client.await_workflow("order-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.output),
        (WorkflowStatus::Success, Some(serde_json::json!({"a": 1})))
    );
    let e = s
        .client
        .start_json("counted", serde_json::json!({"steps": 1}), StartOptions::id("order-1"))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_ID_CONFLICT");
    let listed = s
        .client
        .list(ListOptions {
            workflow_name: Some("echo".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .0;
    assert_eq!(listed.len(), 1);
}

async fn bad_input_gets_stable_reasons(backend: Backend) {
    let Some(s) = setup(backend, &["--max-payload-bytes", "1000"]).await else {
        return;
    };
    let c = &s.client;
    let echo_id = c
        .start_json("echo", serde_json::json!(1), StartOptions::default())
        .await
        .unwrap()
        .workflow
        .workflow_id;
    let cases: Vec<(Result<(), Error>, tonic::Code, &str)> = vec![
        (
            c.get("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.steps("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.cancel("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.resume("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.get("").await.map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.start_json("echo", serde_json::json!(1), StartOptions::id("x".repeat(257)))
                .await
                .map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.start_json("no-such-name", serde_json::json!(1), StartOptions::default())
                .await
                .map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NAME_UNKNOWN",
        ),
        (
            c.start_json("echo", serde_json::json!("y".repeat(2000)), StartOptions::default())
                .await
                .map(drop),
            tonic::Code::ResourceExhausted,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            c.send_message("no-such-workflow", "t", &1, None).await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.send_message(&echo_id, "t", &"m".repeat(2000), None).await.map(drop),
            tonic::Code::ResourceExhausted,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            c.send_message(&echo_id, &"t".repeat(300), &1, None).await.map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.messages("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.events("no-such-workflow").await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.get_event("no-such-workflow", "k", None).await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.get_event(&echo_id, "k", Some(Duration::from_secs(100 * 24 * 3600)))
                .await
                .map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.read_stream("no-such-workflow", "k", 0).await.map(drop),
            tonic::Code::NotFound,
            "WORKFLOW_NOT_FOUND",
        ),
        (
            c.start_json(
                "echo",
                serde_json::json!(1),
                StartOptions {
                    timeout: Some(Duration::from_secs(100 * 366 * 24 * 3600)),
                    ..Default::default()
                },
            )
            .await
            .map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.list(ListOptions {
                page_size: -1,
                ..Default::default()
            })
            .await
            .map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_ARGUMENT",
        ),
        (
            c.list(ListOptions {
                page_token: Some("garbage!".into()),
                ..Default::default()
            })
            .await
            .map(drop),
            tonic::Code::InvalidArgument,
            "INVALID_PAGE_TOKEN",
        ),
    ];
    for (i, (result, code, want)) in cases.into_iter().enumerate() {
        let e = result.expect_err(&format!("case {i} must fail"));
        match &e {
            Error::Rpc {
                code: got,
                reason,
                message,
            } => {
                assert_eq!((*got, reason.as_str()), (code, want), "case {i}: {message}");
                assert!(!message.is_empty());
            }
            other => panic!("case {i}: expected a refusal, got {other}"),
        }
        assert_safe(&e);
    }
    // A non-finite number cannot be JSON.
    let mut raw = waymark_sdk::proto::workflow_service_client::WorkflowServiceClient::new(
        tonic::transport::Channel::from_shared(s.server.addr.clone())
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let nan = waymark_sdk::proto::Payload {
        content: Some(waymark_sdk::proto::payload::Content::Json(prost_types::Value {
            kind: Some(prost_types::value::Kind::NumberValue(f64::NAN)),
        })),
        encoding: String::new(),
    };
    let e = raw
        .start_workflow(waymark_sdk::proto::StartWorkflowRequest {
            workflow_name: "echo".into(),
            input: Some(nan),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // Negative durations cannot be said through the SDK; on the wire they are refused.
    let negative = prost_types::Duration { seconds: -1, nanos: 0 };
    let e = raw
        .start_workflow(waymark_sdk::proto::StartWorkflowRequest {
            workflow_name: "echo".into(),
            input: waymark_sdk::proto::Payload::default().into(),
            timeout: Some(negative),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = raw
        .get_event(waymark_sdk::proto::GetEventRequest {
            workflow_id: echo_id.clone(),
            key: "k".into(),
            timeout: Some(negative),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // The server is still fine.
    assert!(s
        .client
        .start_json("echo", serde_json::json!(1), StartOptions::default())
        .await
        .is_ok());
}

async fn await_honours_the_deadline(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "counted",
            serde_json::json!({"steps": 1, "step_ms": 60000}),
            StartOptions::id("slow"),
        )
        .await
        .unwrap();
    let e = s
        .client
        .await_workflow("slow", Some(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Rpc {
                code: tonic::Code::DeadlineExceeded,
                ..
            }
        ),
        "{e:?}"
    );
}

// conformance: cancel
async fn cancel_stops_at_the_next_step_and_resume_finishes(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let log = s.db.dir.join("effects.log");
    s.client
        .start_json(
            "counted",
            serde_json::json!({"steps": 40, "step_ms": 50}),
            StartOptions::id("long"),
        )
        .await
        .unwrap();
    wait_for("two steps to run", PATIENCE, || {
        let n = side_effects::read(&log).len();
        async move { (n >= 2).then_some(()) }
    })
    .await;
    let cancelled = s.client.cancel("long").await.unwrap();
    assert_eq!(cancelled.status, WorkflowStatus::Cancelled);
    let at_cancel = s.client.steps("long").await.unwrap().len();
    // The worker stops at its next step boundary: at most the step in flight is recorded... and
    // refused, since the workflow is no longer running.
    let w = s.client.await_workflow("long", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Cancelled);
    let after = s.client.steps("long").await.unwrap().len();
    assert!(
        after <= at_cancel,
        "no step recorded after cancel ({at_cancel} → {after})"
    );
    assert!(after < 40);
    let resumed = s.client.resume("long").await.unwrap();
    assert_eq!(resumed.status, WorkflowStatus::Enqueued);
    let done = s.client.await_workflow("long", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.output),
        (WorkflowStatus::Success, Some(serde_json::json!(40)))
    );
    let e = s.client.resume("long").await.unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NOT_RESUMABLE");
}

async fn step_retries_follow_the_policy(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "flaky",
            serde_json::json!({"fail_times": 2, "max_attempts": 3}),
            StartOptions::id("flaky-ok"),
        )
        .await
        .unwrap();
    s.client
        .start_json(
            "flaky",
            serde_json::json!({"fail_times": 5, "max_attempts": 3}),
            StartOptions::id("flaky-bad"),
        )
        .await
        .unwrap();
    let ok = s.client.await_workflow("flaky-ok", Some(PATIENCE)).await.unwrap();
    assert_eq!(ok.status, WorkflowStatus::Success);
    assert_eq!(s.client.steps("flaky-ok").await.unwrap()[0].attempts, 3);
    let bad = s.client.await_workflow("flaky-bad", Some(PATIENCE)).await.unwrap();
    assert_eq!(bad.status, WorkflowStatus::Error);
    assert_eq!(bad.failure.as_ref().unwrap().kind, "StepFailed");
    let step = &s.client.steps("flaky-bad").await.unwrap()[0];
    assert_eq!((step.attempts, step.failure.is_some()), (3, true));
}

waymark_integration_tests::on_both_stores!(
    starts_are_idempotent,
    bad_input_gets_stable_reasons,
    await_honours_the_deadline,
    cancel_stops_at_the_next_step_and_resume_finishes,
    step_retries_follow_the_policy,
);

fn cli(server: &ServerProcess, args: &[&str]) -> (i32, String, String) {
    waymark_integration_tests::run_cli(&server.addr, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_drives_workflows() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let (code, out, err) = cli(
        &s.server,
        &["workflow", "start", "echo", "--input", r#"{"hello":"world"}"#],
    );
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    assert_eq!(out.lines().count(), 1, "start prints only the id: {out:?}");
    let (code, out, _) = cli(&s.server, &["workflow", "await", &id, "--timeout", "60s"]);
    assert_eq!((code, out.trim()), (0, r#"{"hello":"world"}"#));
    let (code, out, _) = cli(&s.server, &["workflow", "get", &id, "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "SUCCESS");
    let (code, out, _) = cli(&s.server, &["workflow", "steps", &id]);
    assert!(code == 0 && out.contains("echo"), "{out}");
    // Export: the history a Replayer replays, with the workflow's name and input.
    let (code, out, err) = cli(&s.server, &["workflow", "export", &id]);
    assert_eq!(code, 0, "{err}");
    let history: waymark_sdk::RecordedHistory = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (history.workflow_id.as_str(), history.workflow_name.as_str()),
        (id.as_str(), "echo")
    );
    assert_eq!(history.input, serde_json::json!({"hello": "world"}));
    assert_eq!(history.steps.len(), s.client.steps(&id).await.unwrap().len());
    let (code, _, _) = cli(&s.server, &["workflow", "export", "nope"]);
    assert_eq!(code, 5);
    let (code, out, _) = cli(
        &s.server,
        &["workflow", "list", "--status", "success", "--name", "echo"],
    );
    assert!(code == 0 && out.contains(&id), "{out}");
    // Exit codes tell not found (5), invalid input (6) and an unreachable server (7) apart.
    let (code, _, err) = cli(&s.server, &["workflow", "get", "nope"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("does not exist"), "{err}");
    let (code, _, err) = cli(&s.server, &["workflow", "start", "echo", "--input", "{not json"]);
    assert!(code == 6 && err.contains("not valid JSON"), "{code} {err}");
    let (code, _, err) = cli(&s.server, &["workflow", "start", "echo", "--id", "a\u{202E}b"]);
    assert!(code == 6 && err.contains("invisible"), "{code} {err}");
    let nobody = format!("http://127.0.0.1:{}", waymark_integration_tests::free_port());
    let (code, _, err) = waymark_integration_tests::cli(&nobody, &["workflow", "get", "x"]);
    assert_eq!(code, 7, "{err}");
    // A reader that goes away early ends the command quietly, not with a panic.
    let piped = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} workflow list --server {} | true; echo \"status=${{PIPESTATUS[0]}}\"",
            waymark_integration_tests::waymark_bin().display(),
            s.server.addr
        ))
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&piped.stdout),
        String::from_utf8_lossy(&piped.stderr),
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.contains("status=0") || out.contains("status=141"), "{out} {err}");
    let (code, _, err) = cli(&s.server, &["workflow", "list", "--status", "sleepy"]);
    assert!(code != 0 && err.contains("unknown status"), "{err}");

    // Messages: send to a waiting workflow, list what it was sent.
    let (code, out, err) = cli(
        &s.server,
        &[
            "workflow",
            "start",
            "inbox",
            "--input",
            r#"{"topic": "t", "timeout_ms": 60000}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let inbox = out.trim().to_string();
    let (code, sent, err) = cli(
        &s.server,
        &[
            "workflow",
            "send",
            &inbox,
            "--topic",
            "t",
            "--message",
            r#"{"ok": true}"#,
            "--idempotency-key",
            "k1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, again, err) = cli(
        &s.server,
        &[
            "workflow",
            "send",
            &inbox,
            "--topic",
            "t",
            "--message",
            r#"{"ok": true}"#,
            "--idempotency-key",
            "k1",
        ],
    );
    assert!(
        code == 0 && again == sent && err.contains("already sent"),
        "{again} {err}"
    );
    let (code, out, _) = cli(&s.server, &["workflow", "await", &inbox, "--timeout", "60s"]);
    assert_eq!((code, out.trim()), (0, r#"{"received":[{"ok":true}]}"#));
    let (code, out, _) = cli(&s.server, &["workflow", "messages", &inbox]);
    assert!(
        code == 0 && out.contains(sent.trim()) && out.contains("step 1"),
        "{out}"
    );
    let (code, _, err) = cli(&s.server, &["workflow", "send", "nope", "--message", "1"]);
    assert!(
        code == 5 && err.contains("does not exist"),
        "not found exits 5: {code} {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_are_on_and_sigterm_drains() {
    let Some(db) = TestDatabase::new(Backend::Sqlite).await else {
        return;
    };
    let mut server = ServerProcess::start(&db, &[]).await;
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let mut reflection = ServerReflectionClient::new(channel);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut resp = reflection
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let listed = resp.message().await.unwrap().unwrap();
    let names: Vec<String> = match listed.message_response {
        Some(MessageResponse::ListServicesResponse(l)) => l.service.into_iter().map(|s| s.name).collect(),
        other => panic!("unexpected {other:?}"),
    };
    for want in [
        "waymark.v1.WorkflowService",
        "waymark.v1.WorkerService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    // The older v1alpha reflection API answers too (older grpcurl and tools use it).
    use tonic_reflection::pb::v1alpha as alpha;
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut old = alpha::server_reflection_client::ServerReflectionClient::new(channel);
    let req = alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
            "google.rpc.ErrorInfo".into(),
        )),
    };
    let mut resp = old
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let answer = resp.message().await.unwrap().unwrap();
    assert!(
        matches!(
            answer.message_response,
            Some(alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(_))
        ),
        "ErrorInfo is described, so tools can decode error details: {answer:?}"
    );
    assert_eq!(server.terminate(), Some(0), "SIGTERM ends the server cleanly");
}

// Attempt: start a workflow with its input read from a file and from standard input; give a
// file that holds no JSON, and one that is not there; ask for one that does not exist with
// --json. Outcome: both inputs reach the workflow; the bad ones are exit 6 naming the file;
// the missing workflow is exit 5 with the error as JSON (its reason) on standard error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reads_input_from_a_file_or_stdin_and_reports_errors_as_json() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let file = s.db.dir.join("input.json");
    std::fs::write(&file, r#"{"from": "file"}"#).unwrap();
    let (code, out, err) = cli(
        &s.server,
        &["workflow", "start", "echo", "--input-file", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let (_, result, _) = cli(&s.server, &["workflow", "await", out.trim(), "--timeout", "60s"]);
    assert_eq!(result.trim(), r#"{"from":"file"}"#);

    let mut piped = std::process::Command::new(waymark_bin())
        .args(["workflow", "start", "echo", "--input-file", "-"])
        .env("WAYMARK_SERVER", &s.server.addr)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    piped.stdin.take().unwrap().write_all(br#"["from", "stdin"]"#).unwrap();
    let out = piped.wait_with_output().unwrap();
    assert!(out.status.success());
    let id = String::from_utf8(out.stdout).unwrap();
    let (_, result, _) = cli(&s.server, &["workflow", "await", id.trim(), "--timeout", "60s"]);
    assert_eq!(result.trim(), r#"["from","stdin"]"#);

    std::fs::write(&file, "not json").unwrap();
    let (code, _, err) = cli(
        &s.server,
        &["workflow", "start", "echo", "--input-file", file.to_str().unwrap()],
    );
    assert_eq!(code, 6);
    assert!(err.contains("input.json is not valid JSON"), "{err}");
    let (code, _, err) = cli(
        &s.server,
        &["workflow", "start", "echo", "--input-file", "/no/such/file"],
    );
    assert_eq!(code, 6);
    assert!(err.contains("cannot read /no/such/file"), "{err}");
    // --input and --input-file are one or the other.
    let (code, _, _) = cli(
        &s.server,
        &["workflow", "start", "echo", "--input", "1", "--input-file", "-"],
    );
    assert_eq!(code, 2);

    let (code, _, err) = cli(&s.server, &["workflow", "get", "no-such-workflow", "--json"]);
    assert_eq!(code, 5);
    let error: serde_json::Value = serde_json::from_str(err.trim()).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(error["error"]["reason"], "WORKFLOW_NOT_FOUND");
    assert_eq!(error["error"]["exit_code"], 5);
}
