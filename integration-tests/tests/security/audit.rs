//! The audit trail: one line per write and refusal, no secret in it.

use waymark_integration_tests::{wait_for, wait_for_registration, Backend};
use waymark_sdk::{Role, StartOptions};

use super::*;

// Attempt: a client cancels a workflow, a reader tries to, a made-up key tries to, an admin
// makes and revokes a key. Outcome: one `waymark::audit` line each, with the key id, the
// namespace, the method, the resource and the outcome; reads leave none; no secret anywhere in
// the log.
async fn writes_and_refusals_leave_an_audit_line(backend: Backend) {
    let Some((db, server, admin_key)) = with_auth(backend, &[]).await else {
        return;
    };
    let admin = client_with(&server, &admin_key).await;
    let (client_id, client_key) = make_key(&admin, Role::Client, &[]).await;
    let (reader_id, reader_key) = make_key(&admin, Role::Reader, &[]).await;
    let (worker_id, worker_key) = make_key(&admin, Role::Worker, &[]).await;
    let _worker = worker_with_key(&server, &db, "w", &worker_key);
    let client = client_with(&server, &client_key).await;
    wait_for_registration(&client, "counted").await;
    client
        .start_json(
            "counted",
            serde_json::json!({"steps": 1}),
            StartOptions::id("audited-1"),
        )
        .await
        .unwrap();
    client.await_workflow("audited-1", Some(PATIENCE)).await.unwrap();
    let reader = client_with(&server, &reader_key).await;
    reader.get("audited-1").await.unwrap();
    reader.cancel("audited-1").await.unwrap_err();
    let fake = format!("wmk_{}_{}", "0".repeat(16), "0".repeat(64));
    client_with(&server, &fake).await.cancel("audited-1").await.unwrap_err();
    let admin_id = admin
        .list_api_keys()
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.name == "bootstrap admin")
        .unwrap()
        .key_id;
    assert!(admin.revoke_api_key(&reader_id).await.unwrap());
    let audit = |needles: Vec<String>| {
        let log = std::fs::read_to_string(&server.log).unwrap_or_default();
        log.lines()
            .find(|l| l.contains("waymark::audit") && needles.iter().all(|n| l.contains(n.as_str())))
            .map(str::to_string)
    };
    let expect = |needles: &[&str]| {
        let needles: Vec<String> = needles.iter().map(|s| s.to_string()).collect();
        async move {
            wait_for(&format!("the audit line with {needles:?}"), PATIENCE, || async {
                audit(needles.clone())
            })
            .await
        }
    };
    expect(&[
        &format!("key_id=\"{client_id}\""),
        "WorkflowService/StartWorkflow",
        "resource=\"audited-1\"",
        "outcome=Ok",
        "namespace=\"default\"",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{reader_id}\""),
        "WorkflowService/CancelWorkflow",
        "outcome=PermissionDenied",
    ])
    .await;
    expect(&[
        "key_id=\"-\"",
        "WorkflowService/CancelWorkflow",
        "outcome=Unauthenticated",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{admin_id}\""),
        "AdminService/RevokeApiKey",
        &format!("resource=\"{reader_id}\""),
        "outcome=Ok",
    ])
    .await;
    expect(&[
        &format!("key_id=\"{admin_id}\""),
        "AdminService/CreateApiKey",
        &format!("resource=\"{worker_id}\""),
    ])
    .await;
    expect(&[
        &format!("key_id=\"{worker_id}\""),
        "WorkerService/Connect",
        "outcome=Ok",
    ])
    .await;
    let log = std::fs::read_to_string(&server.log).unwrap();
    let read = log
        .lines()
        .find(|l| l.contains("waymark::audit") && l.contains("GetWorkflow") && l.contains("outcome=Ok"));
    assert_eq!(read, None, "reads let in are not audited");
    for key in [&admin_key, &client_key, &reader_key, &worker_key] {
        let secret = key.rsplit('_').next().unwrap();
        assert!(!log.contains(secret), "a secret in the log");
    }
}

waymark_integration_tests::on_both_stores!(writes_and_refusals_leave_an_audit_line,);
