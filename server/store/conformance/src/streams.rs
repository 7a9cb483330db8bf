//! Stream cases: what transactions appended, read in order from an offset, ending with the close
//! marker. (Appending as a workflow's step is composed by the engine; its cases are in the
//! engine's tests, on both backends.)

use super::*;

pub async fn streams_are_read_from_an_offset(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("st", "S", "q"), T).await;
    assert!(s.read_stream("st", "log", 0, 10).await.unwrap().is_empty());
    let mut tx = s.begin(T + 1).await.unwrap();
    assert_eq!(tx.append_stream("st", "log", Some(r#""a""#)).await.unwrap(), 0);
    assert_eq!(tx.append_stream("st", "log", Some(r#""b""#)).await.unwrap(), 1);
    assert_eq!(
        tx.append_stream("st", "other", Some("1")).await.unwrap(),
        0,
        "offsets are per key"
    );
    assert_eq!(tx.append_stream("st", "log", None).await.unwrap(), 2);
    tx.commit(Vec::new()).await.unwrap();
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
    assert!(s.read_stream("st", "log", 3, 10).await.unwrap().is_empty());
    assert!(matches!(
        s.read_stream("nobody", "log", 0, 10).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

/// Each stream of a workflow, by key: how many values it holds and whether it was closed.
pub async fn a_workflows_streams_are_listed_with_their_length(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("ls", "S", "q"), T).await;
    assert!(s.list_streams("ls", 10).await.unwrap().is_empty());
    let mut tx = s.begin(T + 1).await.unwrap();
    tx.append_stream("ls", "tokens", Some("1")).await.unwrap();
    tx.append_stream("ls", "tokens", Some("2")).await.unwrap();
    tx.append_stream("ls", "tokens", None).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    let mut tx = s.begin(T + 5).await.unwrap();
    tx.append_stream("ls", "log", Some(r#""a""#)).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    let listed: Vec<(String, u64, bool, Millis)> = s
        .list_streams("ls", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|x| (x.key, x.length, x.closed, x.updated_at))
        .collect();
    assert_eq!(
        listed,
        [("log".into(), 1, false, T + 5), ("tokens".into(), 2, true, T + 1)]
    );
    assert_eq!(s.list_streams("ls", 1).await.unwrap().len(), 1);
    assert!(matches!(
        s.list_streams("nobody", 10).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}
