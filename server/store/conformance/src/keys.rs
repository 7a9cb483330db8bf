//! API key cases: a key is stored once, read back as written, listed newest first, revoked
//! once, and narrowed to fewer namespaces.

use super::*;

fn key(id: &str, role: &str, at: Millis) -> ApiKeyRecord {
    ApiKeyRecord {
        key_id: id.into(),
        secret_sha256: format!("hash-of-{id}"),
        name: format!("{role} key"),
        role: role.into(),
        namespaces: vec!["default".into(), "billing".into()],
        name_patterns: vec!["billing.*".into()],
        created_at: at,
        expires_at: Some(at + 60_000),
        revoked_at: None,
    }
}

pub async fn api_keys_are_stored_listed_and_revoked(s: Arc<dyn Store>) {
    let s = &*s;
    assert!(s.get_api_key("k1").await.unwrap().is_none());
    assert!(!s.any_api_key_with_role("admin").await.unwrap());
    let k1 = key("k1", "admin", T);
    s.create_api_key(&k1).await.unwrap();
    assert!(matches!(
        s.create_api_key(&key("k1", "reader", T + 1)).await,
        Err(StoreError::ApiKeyExists(id)) if id == "k1"
    ));
    assert_eq!(
        s.get_api_key("k1").await.unwrap().as_ref(),
        Some(&k1),
        "read back as written"
    );
    let mut k2 = key("k2", "worker", T + 5);
    k2.namespaces = vec!["*".into()];
    k2.name_patterns = vec![];
    k2.expires_at = None;
    s.create_api_key(&k2).await.unwrap();
    assert!(s.any_api_key_with_role("admin").await.unwrap());
    assert!(!s.any_api_key_with_role("reader").await.unwrap());
    let ids = |v: Vec<ApiKeyRecord>| v.into_iter().map(|k| k.key_id).collect::<Vec<_>>();
    assert_eq!(ids(s.list_api_keys(10).await.unwrap()), ["k2", "k1"], "newest first");
    assert_eq!(ids(s.list_api_keys(1).await.unwrap()), ["k2"], "bounded");
    assert!(s.revoke_api_key("k2", T + 10).await.unwrap());
    assert!(!s.revoke_api_key("k2", T + 11).await.unwrap(), "revoked once");
    assert!(!s.revoke_api_key("nobody", T + 11).await.unwrap());
    let revoked = s.get_api_key("k2").await.unwrap().unwrap();
    assert_eq!(revoked.revoked_at, Some(T + 10), "the first revocation's time stays");
    assert_eq!(revoked.namespaces, ["*"]);
    assert!(revoked.name_patterns.is_empty());
    assert_eq!(s.get_api_key("k1").await.unwrap().unwrap().revoked_at, None);
    // A key's namespaces narrowed (one it listed was deleted): read back narrowed, the rest kept.
    assert!(s.set_api_key_namespaces("k1", &["billing".into()]).await.unwrap());
    assert!(!s.set_api_key_namespaces("nobody", &["billing".into()]).await.unwrap());
    let narrowed = s.get_api_key("k1").await.unwrap().unwrap();
    assert_eq!(narrowed.namespaces, ["billing"]);
    assert_eq!(
        ApiKeyRecord {
            namespaces: k1.namespaces.clone(),
            ..narrowed
        },
        k1
    );
}
