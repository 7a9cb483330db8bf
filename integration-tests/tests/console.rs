//! The web console's port, end to end on both stores, as a browser would use it: its files,
//! and the public API over gRPC-web (HTTP/1.1, `application/grpc-web+proto`), through the same
//! keys, roles and audit trail as the gRPC port. (What the pages do is tested in a real browser:
//! `make -C console test`.)

use std::time::Duration;

use waymark_integration_tests::{
    grpc_web::{grpc_web, http},
    keyed_server, on_both_stores, wait_for, wait_for_registration, waymark_bin, Backend, ServerProcess, TestDatabase,
    WorkerProcess,
};
use waymark_proto::v1;
use waymark_sdk::{ApiKeySpec, Client, Role, StartOptions};

const WHO: &str = "/waymark.v1.AdminService/WhoAmI";
const CANCEL: &str = "/waymark.v1.WorkflowService/CancelWorkflow";
const GET: &str = "/waymark.v1.WorkflowService/GetWorkflow";

/// Start options for a name no worker serves (the workflow waits ENQUEUED).
fn unregistered(id: &str) -> StartOptions {
    StartOptions {
        allow_unregistered: true,
        ..StartOptions::id(id)
    }
}

/// The console's port, as WhoAmI tells it.
async fn console_port(client: &Client) -> u16 {
    let url = client.who_am_i().await.unwrap().console_url.expect("the console is on");
    url.trim_end_matches('/').rsplit(':').next().unwrap().parse().unwrap()
}

async fn get(port: u16, path: &str, host: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n");
    http(port, req.into_bytes()).await
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

// Attempt: open the console of a server without keys; call the API through it, with and
// without a name the browser could have been tricked into using. Outcome: the app's files
// (with a strict content security policy), the API's answers, and a 403 for a foreign host.
async fn the_console_serves_its_files_and_the_api_over_grpc_web(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    let port = console_port(&client).await;

    let (status, headers, body) = get(port, "/ns/default/workflows/anything", "127.0.0.1").await;
    assert_eq!(status, 200, "a route of the app loads index.html");
    assert!(header(&headers, "content-security-policy").is_some_and(|c| c.contains("script-src 'self'")));
    assert_eq!(header(&headers, "x-frame-options"), Some("DENY"));
    assert_eq!(header(&headers, "content-encoding"), Some("gzip"));
    assert!(!body.is_empty());
    assert_eq!(get(port, "/no-such-file.js", "localhost").await.0, 404);

    let me: v1::WhoAmIResponse = grpc_web(port, WHO, &v1::WhoAmIRequest {}, &[], "127.0.0.1").await.ok();
    assert!(!me.auth_enabled && me.key.is_none());
    assert_eq!(me.namespaces, ["default"]);
    assert_eq!(me.console_url, format!("http://127.0.0.1:{port}/"));

    let started = client
        .start_json("console-probe", serde_json::json!(1), unregistered("c-1"))
        .await
        .unwrap();
    let got: v1::GetWorkflowResponse = grpc_web(
        port,
        GET,
        &v1::GetWorkflowRequest {
            workflow_id: started.workflow.workflow_id.clone(),
        },
        &[],
        "localhost:1234",
    )
    .await
    .ok();
    assert_eq!(got.workflow.unwrap().workflow_name, "console-probe");
    let cancelled: v1::CancelWorkflowResponse = grpc_web(
        port,
        CANCEL,
        &v1::CancelWorkflowRequest {
            workflow_id: "c-1".into(),
            cascade: false,
        },
        &[],
        "127.0.0.1",
    )
    .await
    .ok();
    assert_eq!(cancelled.workflow.unwrap().status, v1::WorkflowStatus::Cancelled as i32);

    // A page elsewhere that points its own name at 127.0.0.1 gets nothing.
    assert_eq!(get(port, "/", "rebound.example").await.0, 403);
    let req = format!(
        "POST {WHO} HTTP/1.1\r\nHost: rebound.example:{port}\r\nContent-Type: application/grpc-web+proto\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
    );
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0]);
    assert_eq!(http(port, bytes).await.0, 403);
    // Only GETs and gRPC-web.
    let put = "PUT / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string();
    assert_eq!(http(port, put.into_bytes()).await.0, 405);
}

// Attempt: through the console, sign in with no key, a made-up key, a reader's key and an
// admin's; write as the reader; write as the admin through a read-only console. Outcome:
// UNAUTHENTICATED, WhoAmI with each key's role and namespaces, PERMISSION_DENIED for the
// reader's write, CONSOLE_READ_ONLY for every write through the read-only console (which the
// gRPC port still takes), and the writes that went through in the audit trail with their key.
async fn the_console_honours_keys_and_its_read_only_switch(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let extra = ["--console-read-only".to_string()];
    let (server, admin_key, admin) = keyed_server(&db, &extra).await;
    admin.create_namespace("billing").await.unwrap();
    let (_, reader_key) = admin
        .create_api_key(&ApiKeySpec {
            name: "console reader".into(),
            role: Role::Reader,
            namespaces: vec!["billing".into()],
            name_patterns: Vec::new(),
            expires_at_ms: None,
        })
        .await
        .unwrap();
    let port = console_port(&admin).await;
    let me = admin.who_am_i().await.unwrap();
    assert!(me.auth_enabled && me.console_read_only);
    assert_eq!(
        me.namespaces,
        ["billing", "default"],
        "an admin of '*' sees every namespace"
    );

    // Keys are needed, and a foreign host may then reach the console (the key is the guard).
    let none = grpc_web(port, WHO, &v1::WhoAmIRequest {}, &[], "console.example").await;
    assert_eq!(none.reason().0, tonic::Code::Unauthenticated as i32);
    let made_up = "Bearer wmk_nokey_0000000000000000000000000000000000000000";
    let forged = grpc_web(
        port,
        WHO,
        &v1::WhoAmIRequest {},
        &[("authorization", made_up)],
        "127.0.0.1",
    )
    .await;
    assert_eq!(forged.reason().0, tonic::Code::Unauthenticated as i32);

    let reader = format!("Bearer {reader_key}");
    let me: v1::WhoAmIResponse = grpc_web(
        port,
        WHO,
        &v1::WhoAmIRequest {},
        &[("authorization", &reader)],
        "127.0.0.1",
    )
    .await
    .ok();
    let key = me.key.unwrap();
    assert_eq!(
        (key.role, key.name.as_str()),
        (v1::Role::Reader as i32, "console reader")
    );
    assert_eq!(me.namespaces, ["billing"], "a key sees only its own namespaces");

    let billing = Client::connect_with(&server.connect.clone().api_key(&admin_key).namespace("billing"))
        .await
        .unwrap();
    billing
        .start_json("invoice", serde_json::json!(1), unregistered("inv-1"))
        .await
        .unwrap();
    let cancel = v1::CancelWorkflowRequest {
        workflow_id: "inv-1".into(),
        cascade: false,
    };
    let in_billing = [("waymark-namespace", "billing")];
    // The read-only switch answers first, whatever the key.
    let reader_headers = [("authorization", reader.as_str()), in_billing[0]];
    let refused = grpc_web(port, CANCEL, &cancel, &reader_headers, "127.0.0.1").await;
    assert_eq!(
        refused.reason(),
        (tonic::Code::PermissionDenied as i32, "CONSOLE_READ_ONLY")
    );
    let admin_bearer = format!("Bearer {admin_key}");
    let admin_headers = [("authorization", admin_bearer.as_str()), in_billing[0]];
    let refused = grpc_web(port, CANCEL, &cancel, &admin_headers, "127.0.0.1").await;
    assert_eq!(
        refused.reason(),
        (tonic::Code::PermissionDenied as i32, "CONSOLE_READ_ONLY")
    );
    // Reads pass.
    let got: v1::GetWorkflowResponse = grpc_web(
        port,
        GET,
        &v1::GetWorkflowRequest {
            workflow_id: "inv-1".into(),
        },
        &reader_headers,
        "127.0.0.1",
    )
    .await
    .ok();
    assert_eq!(got.workflow.unwrap().status, v1::WorkflowStatus::Enqueued as i32);
    // An admin may still look at keys and namespaces, not make them.
    let keys: v1::ListApiKeysResponse = grpc_web(
        port,
        "/waymark.v1.AdminService/ListApiKeys",
        &v1::ListApiKeysRequest {},
        &admin_headers,
        "127.0.0.1",
    )
    .await
    .ok();
    assert!(keys.keys.len() >= 2, "{keys:?}");
    let make = v1::CreateApiKeyRequest {
        name: "through the console".into(),
        role: v1::Role::Reader as i32,
        namespaces: vec!["billing".into()],
        ..Default::default()
    };
    let made = grpc_web(
        port,
        "/waymark.v1.AdminService/CreateApiKey",
        &make,
        &admin_headers,
        "127.0.0.1",
    )
    .await;
    assert_eq!(
        made.reason(),
        (tonic::Code::PermissionDenied as i32, "CONSOLE_READ_ONLY")
    );
    // A key of namespaces none of which is default asks who it is without naming one.
    admin.create_namespace("ops").await.unwrap();
    let (_, two) = admin
        .create_api_key(&ApiKeySpec {
            name: "two namespaces".into(),
            role: Role::Reader,
            namespaces: vec!["billing".into(), "ops".into()],
            name_patterns: Vec::new(),
            expires_at_ms: None,
        })
        .await
        .unwrap();
    let two = format!("Bearer {two}");
    let me: v1::WhoAmIResponse = grpc_web(
        port,
        WHO,
        &v1::WhoAmIRequest {},
        &[("authorization", &two)],
        "127.0.0.1",
    )
    .await
    .ok();
    assert_eq!(me.namespaces, ["billing", "ops"]);
    // The gRPC port is not the console: the same write goes through there.
    billing.cancel("inv-1").await.unwrap();
    drop(server);

    // A console that may write: the reader's write is its role's to refuse, the admin's passes
    // and is audited with its key, like any call.
    let db2 = TestDatabase::new(backend).await.unwrap();
    let (server, admin_key, admin) = keyed_server(&db2, &[]).await;
    let (reader_info, reader_key) = admin
        .create_api_key(&ApiKeySpec {
            name: "r".into(),
            role: Role::Reader,
            namespaces: Vec::new(),
            name_patterns: Vec::new(),
            expires_at_ms: None,
        })
        .await
        .unwrap();
    admin
        .start_json("invoice", serde_json::json!(1), unregistered("inv-2"))
        .await
        .unwrap();
    let port = console_port(&admin).await;
    let cancel = v1::CancelWorkflowRequest {
        workflow_id: "inv-2".into(),
        cascade: false,
    };
    let reader = format!("Bearer {reader_key}");
    let refused = grpc_web(port, CANCEL, &cancel, &[("authorization", &reader)], "127.0.0.1").await;
    assert_eq!(refused.reason().0, tonic::Code::PermissionDenied as i32);
    let bearer = format!("Bearer {admin_key}");
    let done: v1::CancelWorkflowResponse = grpc_web(port, CANCEL, &cancel, &[("authorization", &bearer)], "127.0.0.1")
        .await
        .ok();
    assert_eq!(done.workflow.unwrap().status, v1::WorkflowStatus::Cancelled as i32);
    let admin_id = admin.who_am_i().await.unwrap().key.unwrap().key_id;
    let log = server.log.clone();
    let audited = wait_for(
        "the console's cancel in the audit trail",
        Duration::from_secs(30),
        || {
            let log = log.clone();
            let admin_id = admin_id.clone();
            async move {
                let text = std::fs::read_to_string(&log).ok()?;
                text.lines()
                    .find(|l| l.contains("waymark::audit") && l.contains("CancelWorkflow") && l.contains(&admin_id))
                    .map(str::to_string)
            }
        },
    )
    .await;
    assert!(audited.contains("inv-2"), "{audited}");
    assert_ne!(reader_info.key_id, admin_id);
}

// Attempt: `waymark workflow get` against a server with its console, and against one started
// with `--console-listen off`. Outcome: a console line with the workflow's page; none without.
async fn the_cli_links_a_workflow_to_its_console_page(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    client
        .start_json("linked", serde_json::json!(1), unregistered("order 7"))
        .await
        .unwrap();
    let port = console_port(&client).await;
    let run = |addr: String| async move {
        let out = tokio::process::Command::new(waymark_bin())
            .args(["workflow", "get", "order 7", "--server", &addr])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = run(server.addr.clone()).await;
    let line = shown
        .lines()
        .find(|l| l.starts_with("console"))
        .expect("a console line");
    assert!(
        line.ends_with(&format!("http://127.0.0.1:{port}/ns/default/workflows/order%207")),
        "{line}"
    );
    // The page it names is the app; so is one of an id with a dot.
    let (status, _, _) = get(port, "/ns/default/workflows/order%207", "127.0.0.1").await;
    assert_eq!(status, 200);
    let (status, _, _) = get(port, "/ns/default/workflows/order.7", "127.0.0.1").await;
    assert_eq!(status, 200);
    drop(server);

    let off = ServerProcess::start(&db, &["--console-listen".into(), "off".into()]).await;
    let me = off.client().await.who_am_i().await.unwrap();
    assert_eq!(me.console_url, None);
    assert!(!run(off.addr.clone()).await.contains("console"), "no console, no line");
}

// Attempt: a workflow of three steps that each sleep 200 ms, run by a real worker; then an
// hourly schedule. Outcome: each step read back with a start its worker's duration dates — at
// least 200 ms before its checkpoint, and in order — which the console's timeline draws; the
// queue's dispatches per minute count the run; the schedule lists its next five fires an hour
// apart, and none once paused.
async fn steps_carry_their_start_for_the_timeline(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &[]).await;
    let client = server.client().await;
    let _worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 4, "timed");
    wait_for_registration(&client, "counted").await;
    let started = client
        .start_json(
            "counted",
            serde_json::json!({"steps": 3, "step_ms": 200}),
            StartOptions::id("timed"),
        )
        .await
        .unwrap();
    let done = client
        .await_workflow(&started.workflow.workflow_id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(done.output, Some(serde_json::json!(3)));
    let steps = client.steps("timed").await.unwrap();
    assert_eq!(steps.len(), 3);
    let mut previous = 0;
    for s in &steps {
        let began = s
            .started_at_ms
            .unwrap_or_else(|| panic!("step {} has no start", s.step_id));
        let took = s.recorded_at_ms - began;
        assert!((200..60_000).contains(&took), "step {} took {took} ms", s.step_id);
        assert!(began >= previous, "steps start in order: {steps:?}");
        previous = began;
    }
    // What the queue and schedule pages draw: dispatches per minute (one, by this replica, in
    // the last minute or two) and the next fire times.
    let per_minute = client.get_queue("default").await.unwrap().stats.dispatched_per_minute;
    assert_eq!(per_minute.len(), 15);
    assert!(per_minute[13] + per_minute[14] >= 1, "{per_minute:?}");
    let hourly = client
        .create_schedule("hourly", &waymark_sdk::ScheduleDef::new("0 * * * *", "counted"))
        .await
        .unwrap();
    let next = &hourly.upcoming_fire_at_ms;
    assert_eq!(next.len(), 5);
    assert_eq!(Some(next[0]), hourly.next_fire_at_ms);
    assert!(next.windows(2).all(|w| w[1] - w[0] == 3_600_000), "{next:?}");
    let paused = client.pause_schedule("hourly").await.unwrap();
    assert!(paused.upcoming_fire_at_ms.is_empty());
}

on_both_stores!(
    steps_carry_their_start_for_the_timeline,
    the_console_serves_its_files_and_the_api_over_grpc_web,
    the_console_honours_keys_and_its_read_only_switch,
    the_cli_links_a_workflow_to_its_console_page,
);

/// Listening beyond loopback without keys and TLS is refused for the console as for the API.
#[tokio::test]
async fn a_console_beyond_loopback_needs_keys_and_tls() {
    let dir = std::env::temp_dir().join(format!("waymark-console-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = tokio::process::Command::new(waymark_bin())
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--console-listen",
            "0.0.0.0:0",
            "--database-url",
            &format!("sqlite:{}", dir.join("w.db").display()),
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
