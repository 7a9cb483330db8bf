//! Namespace list cases: `default` is listed from the start; a namespace is added once, read
//! back, listed by name, given limits and removed once.

use super::*;

pub async fn namespaces_are_listed_added_and_removed(s: Arc<dyn Store>) {
    let s = &*s;
    let names = |v: Vec<NamespaceRecord>| v.into_iter().map(|n| n.name).collect::<Vec<_>>();
    assert_eq!(names(s.list_namespaces(10).await.unwrap()), ["default"]);
    let billing = s.add_namespace("billing", T).await.unwrap();
    assert_eq!((billing.name.as_str(), billing.created_at), ("billing", T));
    assert!(matches!(
        s.add_namespace("billing", T + 1).await,
        Err(StoreError::NamespaceExists(n)) if n == "billing"
    ));
    s.add_namespace("alpha", T + 2).await.unwrap();
    assert_eq!(
        names(s.list_namespaces(10).await.unwrap()),
        ["alpha", "billing", "default"]
    );
    assert_eq!(
        names(s.list_namespaces(2).await.unwrap()),
        ["alpha", "billing"],
        "bounded"
    );
    assert_eq!(s.get_namespace("billing").await.unwrap(), Some(billing.clone()));
    assert_eq!(
        billing.limits,
        NamespaceLimits::default(),
        "no limits of its own at first"
    );
    // Limits are set whole, read back and listed; None lifts one.
    let limits = NamespaceLimits {
        start_rate: Some(50),
        max_worker_streams: Some(3),
        max_waits: Some(u32::MAX),
    };
    assert!(s.set_namespace_limits("billing", &limits).await.unwrap());
    assert!(!s.set_namespace_limits("nowhere", &limits).await.unwrap());
    assert_eq!(s.get_namespace("billing").await.unwrap().unwrap().limits, limits);
    let listed = s.list_namespaces(10).await.unwrap();
    assert_eq!(listed.iter().find(|n| n.name == "billing").unwrap().limits, limits);
    let lifted = NamespaceLimits {
        start_rate: None,
        ..limits
    };
    assert!(s.set_namespace_limits("billing", &lifted).await.unwrap());
    assert_eq!(s.get_namespace("billing").await.unwrap().unwrap().limits, lifted);
    assert!(s.remove_namespace("billing").await.unwrap());
    assert!(!s.remove_namespace("billing").await.unwrap());
    assert_eq!(s.get_namespace("billing").await.unwrap(), None);
}
