//! Starting, reading, listing, finishing, cancelling and resuming workflows.

use super::*;

pub async fn start_is_idempotent_on_id(s: Arc<dyn Store>) {
    let s = &*s;
    let first = s.start_workflow(wf("w1", "A", "q"), T).await.unwrap();
    assert!(first.created);
    let w = &first.workflow;
    assert_eq!(
        (w.workflow_id.as_str(), w.workflow_name.as_str(), w.queue_name.as_str()),
        ("w1", "A", "q")
    );
    assert_eq!(w.status, WorkflowStatus::Enqueued);
    assert_eq!(w.input, r#"{"id":"w1"}"#);
    assert_eq!((w.created_at, w.updated_at), (T, T));
    assert_eq!((w.epoch, w.recovery_attempts), (0, 0));
    assert_eq!((&w.outcome, &w.worker_id, &w.app_version), (&None, &None, &None));

    // A retried start (even with other input, later) is the same workflow, unchanged.
    let mut again = wf("w1", "A", "other-queue");
    again.input = "[1]".into();
    let second = s.start_workflow(again, T + 50).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.workflow, first.workflow);
    assert_eq!(get(s, "w1").await, first.workflow);

    match s.start_workflow(wf("w1", "B", "q"), T + 60).await {
        Err(StoreError::WorkflowIdConflict {
            workflow_id,
            existing_name,
        }) => assert_eq!((workflow_id.as_str(), existing_name.as_str()), ("w1", "A")),
        other => panic!("expected WorkflowIdConflict, got {other:?}"),
    }

    let mut pinned = wf("w2", "A", "q");
    pinned.app_version = Some("v7".into());
    assert_eq!(start(s, pinned, T).await.app_version.as_deref(), Some("v7"));
}

pub async fn unknown_workflow(s: Arc<dyn Store>) {
    let s = &*s;
    assert_eq!(s.get_workflow("nope").await.unwrap(), None);
    assert!(matches!(s.list_steps("nope").await, Err(StoreError::WorkflowNotFound(id)) if id == "nope"));
    assert!(matches!(
        s.cancel_workflow("nope", T).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    // A workflow that exists but has no steps is an empty list, not an error.
    start(s, wf("w1", "A", "q"), T).await;
    assert_eq!(s.list_steps("w1").await.unwrap(), vec![]);
}

pub async fn list_filters_and_order(s: Arc<dyn Store>) {
    let s = &*s;
    // (id, name, queue, created_at); b1 and b2 share an instant to exercise the id tiebreak.
    for (id, name, queue, at) in [
        ("a1", "A", "q", T),
        ("b2", "B", "q", T + 10),
        ("b1", "B", "q", T + 10),
        ("a2", "A", "other", T + 20),
        ("a3", "A", "q", T + 30),
    ] {
        start(s, wf(id, name, queue), at).await;
    }
    claim_one(s, "w", "B", "b1", T + 40).await; // oldest B by (created_at, id)
    let q = |f: fn(&mut ListQuery)| {
        let mut q = ListQuery {
            limit: 100,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    let all = s.list_workflows(&q(|_| {})).await.unwrap();
    assert_eq!(list_ids(&all), ["a3", "a2", "b2", "b1", "a1"]);
    let limited = s.list_workflows(&q(|q| q.limit = 2)).await.unwrap();
    assert_eq!(list_ids(&limited), ["a3", "a2"]);

    let by_status = q(|q| q.statuses = vec![WorkflowStatus::Pending]);
    assert_eq!(list_ids(&s.list_workflows(&by_status).await.unwrap()), ["b1"]);
    let two_statuses = q(|q| q.statuses = vec![WorkflowStatus::Pending, WorkflowStatus::Enqueued]);
    assert_eq!(s.list_workflows(&two_statuses).await.unwrap().len(), 5);
    let none = q(|q| q.statuses = vec![WorkflowStatus::Success]);
    assert!(s.list_workflows(&none).await.unwrap().is_empty());

    let by_name = q(|q| q.workflow_name = Some("A".into()));
    assert_eq!(list_ids(&s.list_workflows(&by_name).await.unwrap()), ["a3", "a2", "a1"]);
    let by_queue = q(|q| q.queue_name = Some("other".into()));
    assert_eq!(list_ids(&s.list_workflows(&by_queue).await.unwrap()), ["a2"]);
    // Created range is [from, to).
    let range = q(|q| {
        q.created_at_or_after = Some(T + 10);
        q.created_before = Some(T + 30);
    });
    assert_eq!(list_ids(&s.list_workflows(&range).await.unwrap()), ["a2", "b2", "b1"]);
    let combined = q(|q| {
        q.workflow_name = Some("A".into());
        q.queue_name = Some("q".into());
        q.created_before = Some(T + 30);
    });
    assert_eq!(list_ids(&s.list_workflows(&combined).await.unwrap()), ["a1"]);
}

pub async fn list_pages_with_keyset(s: Arc<dyn Store>) {
    let s = &*s;
    // 25 workflows, five to an instant, ids deliberately not in creation order.
    let mut expected = Vec::new();
    for i in 0..25u32 {
        let id = format!("w{:02}", (i * 7) % 25);
        let name = if i % 2 == 0 { "even" } else { "odd" };
        start(s, wf(&id, name, "q"), T + (i / 5) as i64).await;
        expected.push((T + (i / 5) as i64, id, name));
    }
    expected.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1))); // newest first
    for filter in [None, Some("odd")] {
        let want: Vec<&str> = expected
            .iter()
            .filter(|e| filter.is_none_or(|f| f == e.2))
            .map(|e| e.1.as_str())
            .collect();
        let mut seen = Vec::new();
        let mut after = None;
        for _page in 0..20 {
            let query = ListQuery {
                workflow_name: filter.map(str::to_string),
                after: after.clone(),
                limit: 4,
                ..Default::default()
            };
            let page = s.list_workflows(&query).await.unwrap();
            assert!(page.len() <= 4);
            let Some(last) = page.last() else { break };
            after = Some((last.created_at, last.workflow_id.clone()));
            seen.extend(page.into_iter().map(|w| w.workflow_id));
        }
        assert_eq!(seen, want, "pages with filter {filter:?}");
    }
}

pub async fn completion_is_status_gated(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("ok", "A", "q"), T).await;
    start(s, wf("bad", "B", "q"), T).await;
    start(s, wf("queued", "C", "q"), T).await;
    let e = claim_one(s, "k", "A", "ok", T + 1).await;
    claim_one(s, "k", "B", "bad", T + 1).await;

    assert!(matches!(
        s.complete_workflow(&fence("ok", e + 1), Outcome::Output("1".into()), T + 2)
            .await,
        Err(StoreError::StaleEpoch { .. })
    ));
    assert!(matches!(
        s.complete_workflow(&fence("queued", 0), Outcome::Output("1".into()), T + 2)
            .await,
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Enqueued,
            ..
        })
    ));
    assert!(matches!(
        s.complete_workflow(&fence("ghost", 1), Outcome::Output("1".into()), T + 2)
            .await,
        Err(StoreError::WorkflowNotFound(_))
    ));

    let first = s
        .complete_workflow(&fence("ok", e), Outcome::Output("\"first\"".into()), T + 3)
        .await
        .unwrap();
    assert!(!first.adopted);
    assert_eq!(first.workflow.status, WorkflowStatus::Success);
    assert_eq!(first.workflow.outcome, Some(Outcome::Output("\"first\"".into())));
    assert_eq!(first.workflow.updated_at, T + 3);
    // The second finisher, even with the current epoch, adopts the first outcome.
    let second = s
        .complete_workflow(&fence("ok", e), failure("Late"), T + 4)
        .await
        .unwrap();
    assert!(second.adopted);
    assert_eq!(second.workflow, first.workflow);
    assert_eq!(get(s, "ok").await, first.workflow);

    let err = s
        .complete_workflow(&fence("bad", 1), failure("Boom"), T + 5)
        .await
        .unwrap();
    assert!(!err.adopted);
    assert_eq!(
        (err.workflow.status, err.workflow.outcome.clone()),
        (WorkflowStatus::Error, Some(failure("Boom")))
    );
    let again = s
        .complete_workflow(&fence("bad", 1), Outcome::Output("1".into()), T + 6)
        .await
        .unwrap();
    assert!(again.adopted);
    assert_eq!(again.workflow.outcome, Some(failure("Boom")));
}

pub async fn cancel_and_resume(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("queued", "Q", "q"), T).await;
    start(s, wf("running", "R", "q"), T).await;
    start(s, wf("done", "D", "q"), T).await;
    // "running" has been recovered once and re-dispatched, so resume has a count to reset.
    claim_one(s, "k", "R", "running", T + 1).await;
    s.release_worker("k", 5, T + 2).await.unwrap();
    let e = claim_one(s, "k", "R", "running", T + 3).await;
    assert_eq!(e, 2);
    s.record_step(&fence("running", e), step(0, "s0", "0"), T + 4)
        .await
        .unwrap();
    let d = claim_one(s, "k", "D", "done", T + 4).await;
    let done = s
        .complete_workflow(&fence("done", d), Outcome::Output("1".into()), T + 5)
        .await
        .unwrap()
        .workflow;

    for id in ["queued", "running"] {
        let w = s.cancel_workflow(id, T + 6).await.unwrap();
        assert_eq!((w.status, w.updated_at), (WorkflowStatus::Cancelled, T + 6), "{id}");
        assert_eq!(get(s, id).await, w);
    }
    assert_eq!(
        s.cancel_workflow("done", T + 7).await.unwrap(),
        done,
        "finished stays finished"
    );
    assert_eq!(get(s, "done").await, done);
    let again = s.cancel_workflow("queued", T + 8).await.unwrap();
    assert_eq!((again.status, again.updated_at), (WorkflowStatus::Cancelled, T + 6));

    // The worker still running it is refused, and its completion adopts the cancellation.
    assert!(matches!(
        s.record_step(&fence("running", e), step(1, "s1", "1"), T + 9).await,
        Err(StoreError::NotRunning {
            status: WorkflowStatus::Cancelled,
            ..
        })
    ));
    let late = s
        .complete_workflow(&fence("running", e), Outcome::Output("1".into()), T + 9)
        .await
        .unwrap();
    assert!(late.adopted);
    assert_eq!(
        (late.workflow.status, late.workflow.outcome),
        (WorkflowStatus::Cancelled, None)
    );
    assert!(s
        .claim_workflows(&claim("k", &["Q", "R"], &["q"], 5), T + 9)
        .await
        .unwrap()
        .is_empty());

    let resumed = s.resume_workflow("running", T + 10).await.unwrap();
    assert_eq!(
        (resumed.status, resumed.recovery_attempts),
        (WorkflowStatus::Enqueued, 0)
    );
    assert_eq!(resumed.updated_at, T + 10);
    assert!(matches!(
        s.resume_workflow("done", T + 11).await,
        Err(StoreError::NotResumable {
            status: WorkflowStatus::Success,
            ..
        })
    ));
    assert!(matches!(
        s.resume_workflow("running", T + 11).await,
        Err(StoreError::NotResumable {
            status: WorkflowStatus::Enqueued,
            ..
        })
    ));
    assert!(matches!(
        s.resume_workflow("ghost", T + 11).await,
        Err(StoreError::WorkflowNotFound(_))
    ));

    // Dispatched again: a higher epoch, and the steps recorded before the cancel.
    let got = s
        .claim_workflows(&claim("k2", &["R"], &["q"], 5), T + 12)
        .await
        .unwrap();
    assert_eq!(ids(&got), ["running"]);
    assert_eq!(got[0].workflow.epoch, 3);
    assert_eq!(got[0].steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["s0"]);
    assert_eq!(
        s.record_step(&fence("running", 3), step(1, "s1", "1"), T + 13)
            .await
            .unwrap(),
        Recorded::New
    );
}

/// Registered workflow names are remembered; re-registering (any order, repeats) is harmless.
pub async fn workflow_names_are_remembered(store: Arc<dyn Store>) {
    assert!(!store.is_workflow_name_known("checkout").await.unwrap());
    store.register_workflow_names(&[], T).await.unwrap();
    store
        .register_workflow_names(&["checkout".to_string(), "refund".to_string()], T)
        .await
        .unwrap();
    store
        .register_workflow_names(&["refund".to_string()], T + 1)
        .await
        .unwrap();
    assert!(store.is_workflow_name_known("checkout").await.unwrap());
    assert!(store.is_workflow_name_known("refund").await.unwrap());
    assert!(!store.is_workflow_name_known("Checkout").await.unwrap());
}

/// A fleet of workers registering the same names at once, each in its own order, all get
/// through: no two registrations lock the names in different orders (which deadlocks on
/// PostgreSQL).
pub async fn concurrent_registrations_of_the_same_names_all_succeed(s: Arc<dyn Store>) {
    let names: Vec<String> = (0..14).map(|i| format!("name-{i:02}")).collect();
    let mut tasks = Vec::new();
    for w in 0..24usize {
        let s = s.clone();
        let mut mine = names.clone();
        // A different order per worker, as each worker's hash map gives.
        mine.rotate_left(w % names.len());
        if w % 2 == 1 {
            mine.reverse();
        }
        tasks.push(tokio::spawn(async move {
            for round in 0..5 {
                s.register_workflow_names(&mine, T + round).await?;
            }
            Ok::<_, StoreError>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().expect("every registration succeeds");
    }
    for n in &names {
        assert!(s.is_workflow_name_known(n).await.unwrap());
    }
}

/// An id prefix matches exactly the ids that start with it: not a longer id that only shares
/// its first characters with the prefix's successor, nor a shorter one.
pub async fn ids_are_filtered_by_prefix(s: Arc<dyn Store>) {
    let s = &*s;
    for (i, id) in [
        "schedule:daily:2026-01-01",
        "schedule:daily:2026-01-02",
        "schedule:daily",
        "schedule:dailz:x",
        "schedule:daily\u{10FFFF}",
        "schedule:dai",
        "order-1",
    ]
    .into_iter()
    .enumerate()
    {
        start(s, wf(id, "W", "q"), T + i as i64).await;
    }
    let by = |p: &str| ListQuery {
        id_prefix: Some(p.to_string()),
        limit: 100,
        ..Default::default()
    };
    let found = s.list_workflows(&by("schedule:daily:")).await.unwrap();
    let mut ids = list_ids(&found);
    ids.sort();
    assert_eq!(ids, ["schedule:daily:2026-01-01", "schedule:daily:2026-01-02"]);
    let found = s.list_workflows(&by("schedule:daily")).await.unwrap();
    let mut ids = list_ids(&found);
    ids.sort();
    assert_eq!(
        ids,
        [
            "schedule:daily",
            "schedule:daily:2026-01-01",
            "schedule:daily:2026-01-02",
            "schedule:daily\u{10FFFF}"
        ]
    );
    assert_eq!(s.count_workflows(&by("schedule:")).await.unwrap(), 6);
    assert!(s.list_workflows(&by("nothing")).await.unwrap().is_empty());
    // With other filters: all must match.
    let mut q = by("order");
    q.workflow_name = Some("W".into());
    assert_eq!(list_ids(&s.list_workflows(&q).await.unwrap()), ["order-1"]);
}

/// Starts that arrive together share a transaction (group commit), yet each gets the answer it
/// would get alone: one workflow per id, a repeat finds it, another name under a taken id is
/// refused, one holder per dedup id, and a start the database rejects (a NUL byte, which
/// PostgreSQL's text refuses and SQLite keeps) fails alone, its neighbours started.
pub async fn concurrent_starts_each_get_their_own_answer(s: Arc<dyn Store>) {
    const IDS: usize = 120;
    let mut starts = Vec::new();
    for i in 0..IDS {
        starts.push(wf(&format!("g{i:03}"), "G", "q"));
    }
    // Repeats of the first 40 ids, and another name racing for the next 20.
    for i in 0..40 {
        starts.push(wf(&format!("g{i:03}"), "G", "q"));
    }
    for i in 40..60 {
        starts.push(wf(&format!("g{i:03}"), "H", "q"));
    }
    // Thirty starts of one dedup id.
    for i in 0..30 {
        starts.push(NewWorkflow {
            dedup_id: Some("once".into()),
            ..wf(&format!("d{i:02}"), "G", "q")
        });
    }
    for i in 0..5 {
        starts.push(NewWorkflow {
            input: "\"nul \u{0}\"".into(),
            ..wf(&format!("bad{i}"), "G", "q")
        });
    }
    let mut tasks = Vec::new();
    for new in starts {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let asked = (new.workflow_id.clone(), new.workflow_name.clone());
            (asked, s.start_workflow(new, T).await)
        }));
    }
    let mut created = std::collections::BTreeMap::<String, String>::new();
    let mut answers = Vec::new();
    for t in tasks {
        let ((id, name), answer) = t.await.unwrap();
        if let Ok(started) = &answer {
            if started.created {
                let before = created.insert(id.clone(), name.clone());
                assert!(before.is_none(), "{id} was created twice");
            }
        }
        answers.push((id, name, answer));
    }
    let mut bad_refused = 0;
    let mut dedup_refused = 0;
    for (id, name, answer) in &answers {
        match answer {
            Ok(started) => {
                assert_eq!(&started.workflow.workflow_id, id);
                assert_eq!(
                    created.get(id),
                    Some(&started.workflow.workflow_name),
                    "{id}: answered another workflow"
                );
                assert_eq!(
                    &started.workflow.workflow_name, name,
                    "{id}: a start of another name was not refused"
                );
            }
            Err(StoreError::WorkflowIdConflict {
                workflow_id,
                existing_name,
            }) => {
                assert_eq!(workflow_id, id);
                assert_ne!(existing_name, name);
                assert_eq!(created.get(id), Some(existing_name));
            }
            Err(StoreError::Duplicate { dedup_id, holder }) => {
                assert_eq!(dedup_id, "once");
                assert!(id.starts_with('d') && holder.starts_with('d') && holder != id);
                dedup_refused += 1;
            }
            Err(StoreError::Unavailable(_)) if id.starts_with("bad") => bad_refused += 1,
            Err(e) => panic!("{id}: unexpected {e:?}"),
        }
    }
    // Every id but the rejected ones has its one workflow, of the name that won it.
    for i in 0..IDS {
        let id = format!("g{i:03}");
        let w = get(&*s, &id).await;
        assert_eq!(created.get(&id), Some(&w.workflow_name));
        assert_eq!(w.status, WorkflowStatus::Enqueued);
        if !(40..60).contains(&i) {
            assert_eq!(w.workflow_name, "G");
        }
    }
    assert_eq!(created.keys().filter(|k| k.starts_with('d')).count(), 1);
    assert_eq!(dedup_refused, 29);
    // A rejected start left nothing; an accepted one is there.
    for i in 0..5 {
        let id = format!("bad{i}");
        let found = s.get_workflow(&id).await.unwrap();
        assert_eq!(found.is_some(), created.contains_key(&id));
    }
    assert_eq!(bad_refused + created.keys().filter(|k| k.starts_with("bad")).count(), 5);
}
