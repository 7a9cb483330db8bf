//! The access table, over the wire: every row of `waymark_server::auth::access::TABLE` (every
//! method of the contract: the server's own test fails until a new RPC has a row) is called on
//! a real server with authentication on — with no key, with a key of each role, and with a key
//! of the right role from another namespace — and each answer is checked against what the table
//! and the roles say. The body of every call is the empty message: a refusal comes before the
//! body is read, and a call let in is answered by its service (mostly INVALID_ARGUMENT or
//! NOT_FOUND), which is all this test needs to tell the two apart.

use std::time::Duration;

use tonic::{codegen::http::uri::PathAndQuery, Code};
use waymark_integration_tests::{keyed_server, Backend, TestDatabase};
use waymark_sdk::{ApiKeySpec, Role};
use waymark_server::auth::{
    access::{required, Access, KEY_ONLY, TABLE},
    Role as ServerRole,
};

/// Calls `path` with the empty message and these metadata; the status it was answered with
/// (OK when it succeeded).
async fn call(channel: &tonic::transport::Channel, path: &str, key: Option<&str>, namespace: &str) -> Code {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("the channel is up");
    let mut req = tonic::Request::new(());
    req.set_timeout(Duration::from_secs(30));
    if let Some(k) = key {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    req.metadata_mut()
        .insert("waymark-namespace", namespace.parse().unwrap());
    let path = PathAndQuery::try_from(path.to_string()).unwrap();
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    match grpc.unary(req, path, codec).await {
        Ok(_) => Code::Ok,
        Err(s) => s.code(),
    }
}

fn refused(code: Code) -> bool {
    matches!(code, Code::Unauthenticated | Code::PermissionDenied)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_is_answered_as_the_access_table_says() {
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let (server, root_key, root) = keyed_server(&db, &[]).await;
    for ns in ["blue", "green"] {
        root.create_namespace(ns).await.unwrap();
    }
    let mut keys = Vec::new();
    for (role, server_role) in [
        (Role::Reader, ServerRole::Reader),
        (Role::Client, ServerRole::Client),
        (Role::Worker, ServerRole::Worker),
        (Role::Admin, ServerRole::Admin),
    ] {
        let (_, key) = root
            .create_api_key(&ApiKeySpec {
                name: format!("{role:?} of blue"),
                role,
                namespaces: vec!["blue".into()],
                name_patterns: vec![],
                expires_at_ms: None,
            })
            .await
            .unwrap();
        keys.push((server_role, false, key));
    }
    // And the first admin key, of every namespace ('*').
    keys.push((ServerRole::Admin, true, root_key.clone()));
    let channel = tonic::transport::Channel::from_shared(server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (path, access) in TABLE {
        assert_eq!(required(path), *access);
        // No key.
        let code = call(&channel, path, None, "blue").await;
        let expected_refusal = (*access != Access::Open).then_some(Code::Unauthenticated);
        if expected_refusal.is_some_and(|e| e != code) || (expected_refusal.is_none() && refused(code)) {
            failures.push(format!("{path} with no key: {code:?}"));
        }
        for (role, of_all, key) in &keys {
            // Each role, in its own namespace. Namespaces themselves are for an admin of all.
            let code = call(&channel, path, Some(key), "blue").await;
            let may = role.may(*access) && (*access != Access::Server || *of_all);
            if may == refused(code) || (!may && code != Code::PermissionDenied) {
                failures.push(format!(
                    "{path} as {role:?} (of every namespace: {of_all}) in its namespace: {code:?} (may: {may})"
                ));
            }
            // The same key from another namespace: refused wherever the namespace decides;
            // an admin call acts on the server's keys and namespaces, whatever it names, so
            // it is answered as in the key's own namespace.
            if may {
                let elsewhere = call(&channel, path, Some(key), "green").await;
                let ok = match access {
                    Access::Open => !refused(elsewhere),
                    Access::Administer | Access::Server => elsewhere == code,
                    // WhoAmI is about the key, whatever namespace the call names.
                    _ if KEY_ONLY.contains(path) => elsewhere == code,
                    // A key of every namespace is at home in any.
                    _ if *of_all => !refused(elsewhere),
                    _ => elsewhere == Code::PermissionDenied,
                };
                if !ok {
                    failures.push(format!(
                        "{path} as {role:?} from another namespace: {elsewhere:?} (in its own: {code:?})"
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "answers that differ from the access table:\n{}",
        failures.join("\n")
    );
    assert_eq!(checked, TABLE.len() * keys.len());
    assert!(TABLE.len() > 30);
}
