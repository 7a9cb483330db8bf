//! Queue cases: the default queue exists; create, update (only what is named), get, list,
//! delete; workers' declared queues are created without limits.

use super::*;

pub async fn queues_are_created_changed_and_removed(s: Arc<dyn Store>) {
    let s = &*s;
    let default = s.get_queue(DEFAULT_QUEUE).await.unwrap().expect("default exists");
    assert_eq!(default.limits, QueueLimits::default());
    let limits = QueueLimits {
        worker_concurrency: Some(2),
        global_concurrency: Some(5),
        rate_limit: Some(RateLimit {
            max_starts: 10,
            period_ms: 1_000,
        }),
        partition_concurrency: None,
    };
    let created = s.create_queue("orders", &limits, T).await.unwrap();
    assert_eq!(
        (created.name.as_str(), &created.limits, created.created_at),
        ("orders", &limits, T)
    );
    assert!(matches!(
        s.create_queue("orders", &QueueLimits::default(), T + 1).await,
        Err(StoreError::QueueExists(n)) if n == "orders"
    ));
    assert_eq!(
        s.get_queue("orders").await.unwrap().unwrap().limits,
        limits,
        "unchanged by the refused create"
    );
    // An update changes only the limits it names.
    let update = QueueUpdate {
        global_concurrency: Some(None),
        partition_concurrency: Some(Some(1)),
        ..Default::default()
    };
    let updated = s.update_queue("orders", &update, T + 2).await.unwrap();
    assert_eq!(
        (
            updated.limits.worker_concurrency,
            updated.limits.global_concurrency,
            updated.limits.partition_concurrency
        ),
        (Some(2), None, Some(1))
    );
    assert_eq!(
        (updated.limits.rate_limit, updated.updated_at),
        (limits.rate_limit, T + 2)
    );
    assert!(matches!(
        s.update_queue("nope", &update, T + 3).await,
        Err(StoreError::QueueNotFound(_))
    ));
    // Declared queues are created without limits; existing ones are left alone.
    s.ensure_queues(&["orders".into(), "emails".into()], T + 4)
        .await
        .unwrap();
    let names: Vec<String> = s.list_queues().await.unwrap().into_iter().map(|q| q.name).collect();
    assert_eq!(names, ["default", "emails", "orders"]);
    assert_eq!(
        s.get_queue("orders").await.unwrap().unwrap().limits.worker_concurrency,
        Some(2)
    );
    assert!(s.delete_queue("emails").await.unwrap());
    assert!(!s.delete_queue("emails").await.unwrap());
    assert!(s.get_queue("emails").await.unwrap().is_none());
}
