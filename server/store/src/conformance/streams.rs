//! Stream cases: appends in order, recorded once, closed with a marker, fenced.

use super::*;

pub async fn streams_append_in_order_and_close(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("st", "S", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "S", "st", T).await;
    let f = fence("st", 1);
    assert!(s.read_stream("st", "log", 0, 10).await.unwrap().is_empty());
    assert_eq!(
        s.write_stream_step(&f, 0, "log", Some(r#""a""#), T + 1).await.unwrap(),
        0
    );
    assert_eq!(
        s.write_stream_step(&f, 1, "log", Some(r#""b""#), T + 2).await.unwrap(),
        1
    );
    assert_eq!(
        s.write_stream_step(&f, 2, "other", Some("1"), T + 3).await.unwrap(),
        0,
        "offsets are per key"
    );
    // A replay writes nothing more and returns the recorded offset.
    assert_eq!(
        s.write_stream_step(&f, 1, "log", Some(r#""b""#), T + 4).await.unwrap(),
        1
    );
    assert_eq!(s.write_stream_step(&f, 3, "log", None, T + 5).await.unwrap(), 2);
    let all = s.read_stream("st", "log", 0, 10).await.unwrap();
    let entries: Vec<(u64, Option<&str>, bool)> =
        all.iter().map(|e| (e.offset, e.value.as_deref(), e.closed)).collect();
    assert_eq!(
        entries,
        [(0, Some(r#""a""#), false), (1, Some(r#""b""#), false), (2, None, true)]
    );
    let from_one: Vec<u64> = s
        .read_stream("st", "log", 1, 1)
        .await
        .unwrap()
        .iter()
        .map(|e| e.offset)
        .collect();
    assert_eq!(from_one, [1]);
    let names: Vec<String> = s.list_steps("st").await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            WRITE_STREAM_STEP,
            WRITE_STREAM_STEP,
            WRITE_STREAM_STEP,
            CLOSE_STREAM_STEP
        ]
    );
    // Fenced, and unknown workflows are not found.
    assert!(matches!(
        s.write_stream_step(&fence("st", 5), 4, "log", Some("1"), T).await,
        Err(StoreError::StaleEpoch { .. })
    ));
    assert!(matches!(
        s.read_stream("nobody", "log", 0, 10).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    // A different step at a recorded write is non-determinism.
    assert!(matches!(
        s.write_stream_step(&f, 3, "log", Some("1"), T + 6).await,
        Err(StoreError::NonDeterminism { .. })
    ));
}
