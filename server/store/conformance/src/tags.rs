//! Tags: kept with the workflow, matched all-of by a listing (through the tag index on both
//! backends), copied by a fork, and gone with a deleted workflow.

use super::*;

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn tagged(id: &str, pairs: &[(&str, &str)]) -> NewWorkflow {
    NewWorkflow {
        tags: tags(pairs),
        ..wf(id, "W", "q")
    }
}

async fn listed(s: &dyn Store, pairs: &[(&str, &str)], f: fn(&mut ListQuery)) -> (Vec<String>, u64) {
    let mut q = ListQuery {
        tags: tags(pairs),
        limit: 100,
        ..Default::default()
    };
    f(&mut q);
    let ids = list_ids(&s.list_workflows(&q).await.unwrap())
        .iter()
        .map(|s| s.to_string())
        .collect();
    (ids, s.count_workflows(&q).await.unwrap())
}

pub async fn tags_are_kept_matched_all_of_copied_by_a_fork_and_deleted_with_the_workflow(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, tagged("a", &[("team", "pay"), ("env", "prod")]), T).await;
    start(s, tagged("b", &[("team", "pay"), ("env", "dev")]), T + 1).await;
    start(s, wf("c", "W", "q"), T + 2).await;
    // A value may hold `=`: keys cannot (the engine refuses them), so the first `=` of an index
    // row separates key from value.
    start(s, tagged("d", &[("expr", "x=y")]), T + 3).await;

    assert_eq!(get(s, "a").await.tags, tags(&[("env", "prod"), ("team", "pay")]));
    assert!(get(s, "c").await.tags.is_empty(), "no tags: none read back");

    assert_eq!(
        listed(s, &[], |_| {}).await,
        (vec!["d".into(), "c".into(), "b".into(), "a".into()], 4)
    );
    assert_eq!(
        listed(s, &[("team", "pay")], |_| {}).await,
        (vec!["b".into(), "a".into()], 2)
    );
    assert_eq!(
        listed(s, &[("team", "pay"), ("env", "prod")], |_| {}).await,
        (vec!["a".into()], 1)
    );
    assert_eq!(
        listed(s, &[("team", "ops"), ("env", "prod")], |_| {}).await,
        (vec![], 0),
        "all of them, not any"
    );
    assert_eq!(
        listed(s, &[("team", "PAY")], |_| {}).await,
        (vec![], 0),
        "values match exactly"
    );
    assert_eq!(listed(s, &[("expr", "x=y")], |_| {}).await, (vec!["d".into()], 1));
    assert_eq!(listed(s, &[("expr", "x")], |_| {}).await, (vec![], 0));
    // With the other filters and the keyset pages.
    claim_one(s, "w", "W", "a", T + 4).await;
    let pending = listed(s, &[("team", "pay")], |q| q.statuses = vec![WorkflowStatus::Pending]).await;
    assert_eq!(pending, (vec!["a".into()], 1));
    let page = listed(s, &[("team", "pay")], |q| q.after = Some((T + 1, "b".into()))).await;
    assert_eq!(page.0, ["a"]);

    // A child is inserted with the tags it is given (the engine merges its parent's in).
    let mut tx = s.begin(T + 5).await.unwrap();
    assert!(tx
        .insert_child("a", &tagged("a-child", &[("team", "pay"), ("env", "child")]))
        .await
        .unwrap());
    tx.commit(Vec::new()).await.unwrap();
    assert_eq!(listed(s, &[("env", "child")], |_| {}).await.0, ["a-child"]);

    // A fork carries its source's tags.
    let fork = Fork {
        source: "b".into(),
        from_step: None,
        new_workflow_id: "b-fork".into(),
        app_version: None,
        queue_name: None,
    };
    let forked = s.fork_workflow(&fork, T + 5).await.unwrap();
    assert_eq!(forked.tags, tags(&[("env", "dev"), ("team", "pay")]));
    assert_eq!(listed(s, &[("env", "dev")], |_| {}).await.0, ["b-fork", "b"]);

    // Deleted with its workflow: an untagged workflow under the same id is not found by them.
    s.cancel_workflow("b", T + 6).await.unwrap();
    s.delete_workflow("b", false).await.unwrap();
    start(s, wf("b", "W", "q"), T + 7).await;
    assert_eq!(listed(s, &[("env", "dev")], |_| {}).await, (vec!["b-fork".into()], 1));
    assert_eq!(listed(s, &[("team", "pay")], |_| {}).await.1, 3, "a, a-child, b-fork");
}
