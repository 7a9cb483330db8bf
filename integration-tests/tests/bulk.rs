//! Finding and moving many workflows at once, through a real server on SQLite and PostgreSQL:
//! tags given at the start and inherited by children, listed by; re-pinning workflows stranded
//! on a retired application version, one or by filter; bulk cancel, resume and delete by
//! filter, with a dry run first, in batches, safe to run twice.

use std::{collections::BTreeMap, time::Duration};

use serde_json::json;
use waymark_integration_tests::{cli, setup, Backend};
use waymark_sdk::{BulkAction, Client, Error, ListOptions, StartOptions, WorkflowFilter, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn reason(e: &Error) -> &str {
    e.reason().unwrap_or("<no reason>")
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The ids of the workflows carrying `pairs` (and, when given, in `status`), sorted.
async fn tagged(c: &Client, pairs: &[(&str, &str)], status: Option<WorkflowStatus>) -> Vec<String> {
    let options = ListOptions {
        tags: tags(pairs),
        statuses: status.into_iter().collect(),
        page_size: 1000,
        ..Default::default()
    };
    let mut ids: Vec<String> = c
        .list(options)
        .await
        .unwrap()
        .0
        .into_iter()
        .map(|w| w.workflow_id)
        .collect();
    ids.sort();
    ids
}

async fn tags_are_kept_inherited_by_children_and_listed_by(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    // Its children inherit its tags, and override `step` with their own.
    let family = json!({ "children": [["echo", 1], ["echo", 2]], "child_tags": { "step": "child" } });
    let start = StartOptions {
        tags: tags(&[("team", "payments"), ("run", "r1"), ("step", "parent")]),
        ..StartOptions::id("fam")
    };
    c.start_json("family", family, start).await.unwrap();
    assert_eq!(
        c.await_workflow("fam", Some(PATIENCE)).await.unwrap().status,
        WorkflowStatus::Success
    );
    let fam = c.get("fam").await.unwrap();
    assert_eq!(
        fam.tags,
        tags(&[("run", "r1"), ("step", "parent"), ("team", "payments")])
    );
    let tree = tagged(c, &[("team", "payments")], None).await;
    assert_eq!(tree.len(), 3, "the parent and both children: {tree:?}");
    for child in tree.iter().filter(|id| *id != "fam") {
        let w = c.get(child).await.unwrap();
        let own = tags(&[("run", "r1"), ("step", "child"), ("team", "payments")]);
        assert_eq!(
            (w.parent_workflow_id.as_str(), &w.tags),
            ("fam", &own),
            "inherited, one key overridden"
        );
    }
    assert!(
        tagged(c, &[("team", "payments"), ("run", "r2")], None).await.is_empty(),
        "all must match"
    );
    assert_eq!(
        tagged(c, &[("step", "child")], None).await.len(),
        2,
        "the children's own tag"
    );

    // From the CLI: start with tags, list by them, see them.
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "start",
            "echo",
            "--input",
            "3",
            "--id",
            "cli-tagged",
            "--tag",
            "team=ops",
            "--tag",
            "k8s.io/app=a=b",
        ],
    );
    assert_eq!((code, out.trim()), (0, "cli-tagged"), "{err}");
    let (code, out, err) = cli(&s.server.addr, &["workflow", "list", "--tag", "k8s.io/app=a=b"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cli-tagged") && !out.contains("fam"), "{out}");
    let (_, shown, _) = cli(&s.server.addr, &["workflow", "get", "cli-tagged"]);
    assert!(
        shown.contains("tags") && shown.contains("k8s.io/app=a=b team=ops"),
        "{shown}"
    );

    // Bounds: a key with `=` or too many tags is refused, naming the rule.
    let bad = StartOptions {
        tags: tags(&[("a=b", "c")]),
        ..StartOptions::id("bad-tag")
    };
    let e = c.start_json("echo", json!(1), bad).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::InvalidArgument), "INVALID_ARGUMENT")
    );
    let many = StartOptions {
        tags: (0..17).map(|i| (format!("k{i}"), "v".to_string())).collect(),
        ..StartOptions::id("many-tags")
    };
    let e = c.start_json("echo", json!(1), many).await.unwrap_err();
    assert!(e.to_string().contains("at most 16"), "{e}");
    let e = c.get("bad-tag").await.unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NOT_FOUND", "a refused start leaves nothing");
}

async fn workflows_stranded_on_a_retired_version_are_re_pinned_one_or_by_filter(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    // Pinned to a version whose workers are gone: they wait ENQUEUED.
    for i in 0..6 {
        let start = StartOptions {
            app_version: Some("retired".into()),
            tags: tags(&[("batch", "stranded")]),
            ..StartOptions::id(format!("old-{i}"))
        };
        c.start_json("echo", json!(i), start).await.unwrap();
    }
    // A version no worker serves is refused, unless asked; a finished workflow is refused.
    let e = c.set_version("old-0", "test-9", false).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::FailedPrecondition), "VERSION_NOT_SERVED")
    );
    assert_eq!(
        c.get("old-0").await.unwrap().app_version,
        "retired",
        "a refusal changes nothing"
    );
    // One by hand, through the CLI: it runs on the live version's worker.
    let (code, _, err) = cli(&s.server.addr, &["workflow", "set-version", "old-0", "test-1"]);
    assert_eq!(code, 0, "{err}");
    let done = c.await_workflow("old-0", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.app_version.as_str(), done.output),
        (WorkflowStatus::Success, "test-1", Some(json!(0)))
    );
    let e = c.set_version("old-0", "test-1", true).await.unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_FINISHED");

    // The rest by filter: counted first, then moved two at a time.
    let stranded = WorkflowFilter {
        app_version: Some("retired".into()),
        ..Default::default()
    };
    assert_eq!(c.count_matching(&stranded).await.unwrap(), 5);
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "bulk",
            "set-version",
            "--app-version",
            "retired",
            "--dry-run",
        ],
    );
    assert_eq!((code, out.trim()), (0, "5 workflows match"), "{err}");
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "bulk",
            "set-version",
            "--app-version",
            "retired",
            "--to-version",
            "test-1",
            "--batch-size",
            "2",
        ],
    );
    assert_eq!((code, out.trim()), (0, "5 matched, 5 changed"), "{err}");
    for i in 1..6 {
        let w = c.await_workflow(&format!("old-{i}"), Some(PATIENCE)).await.unwrap();
        assert_eq!((w.status, w.output), (WorkflowStatus::Success, Some(json!(i))));
    }
    // Again: nothing is pinned there any more.
    let again = c
        .bulk(
            &stranded,
            &BulkAction::SetVersion {
                app_version: "test-1".into(),
                allow_unserved: false,
            },
            2,
        )
        .await
        .unwrap();
    assert_eq!((again.matched, again.applied), (0, 0));
    // Re-pinning finished ones by tag: each skipped as finished.
    let by_tag = WorkflowFilter {
        tags: tags(&[("batch", "stranded")]),
        ..Default::default()
    };
    let finished = c
        .bulk(
            &by_tag,
            &BulkAction::SetVersion {
                app_version: "test-2".into(),
                allow_unserved: true,
            },
            4,
        )
        .await
        .unwrap();
    assert_eq!((finished.matched, finished.applied), (6, 0));
    assert_eq!(finished.skipped, BTreeMap::from([("WORKFLOW_FINISHED".to_string(), 6)]));
}

async fn workflows_are_cancelled_resumed_and_deleted_by_filter_in_batches(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let waiting = json!({ "topic": "t", "timeout_ms": 600_000 });
    for i in 0..5 {
        let start = StartOptions {
            tags: tags(&[("job", "nightly")]),
            ..StartOptions::id(format!("n-{i}"))
        };
        c.start_json("inbox", waiting.clone(), start).await.unwrap();
    }
    c.start_json("inbox", waiting.clone(), StartOptions::id("other"))
        .await
        .unwrap();
    let nightly = WorkflowFilter {
        tags: tags(&[("job", "nightly")]),
        ..Default::default()
    };
    assert_eq!(c.count_matching(&nightly).await.unwrap(), 5);

    // By creation time, through the CLI's time flags (RFC 3339, millisecond precision): those
    // created at or after n-2's start, and those before it, add up to the five.
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(c.get(&format!("n-{i}")).await.unwrap().created_at_ms);
    }
    let t = created[2];
    let at = chrono::DateTime::from_timestamp_millis(t)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let after = created.iter().filter(|&&c| c >= t).count();
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "bulk",
            "cancel",
            "--tag",
            "job=nightly",
            "--created-after",
            &at,
            "--dry-run",
        ],
    );
    assert_eq!(
        (code, out.trim()),
        (0, format!("{after} workflows match").as_str()),
        "{err}"
    );
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "list",
            "--tag",
            "job=nightly",
            "--created-before",
            &at,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["workflows"].as_array().unwrap().len(), 5 - after, "{out}");
    let (code, _, err) = cli(&s.server.addr, &["workflow", "list", "--created-after", "yesterday"]);
    assert!(code != 0 && err.contains("RFC 3339"), "{err}");

    // Deleting what has not finished: every one skipped, none touched.
    let refused = c.bulk(&nightly, &BulkAction::Delete, 2).await.unwrap();
    assert_eq!((refused.matched, refused.applied), (5, 0));
    assert_eq!(
        refused.skipped,
        BTreeMap::from([("WORKFLOW_NOT_FINISHED".to_string(), 5)])
    );

    // From a script, the CLI cancels nothing nobody confirmed.
    let (code, _, err) = cli(&s.server.addr, &["workflow", "bulk", "cancel", "--tag", "job=nightly"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(tagged(c, &[("job", "nightly")], Some(WorkflowStatus::Cancelled))
        .await
        .is_empty());
    // Cancel in batches of two (three calls), from the CLI; the untagged one is left alone.
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "bulk",
            "cancel",
            "--tag",
            "job=nightly",
            "--batch-size",
            "2",
            "--yes",
        ],
    );
    assert_eq!((code, out.trim()), (0, "5 matched, 5 changed"), "{err}");
    assert_eq!(
        tagged(c, &[("job", "nightly")], Some(WorkflowStatus::Cancelled))
            .await
            .len(),
        5
    );
    assert!(!c.get("other").await.unwrap().status.is_terminal());
    // Twice is safe: nothing is cancelled again.
    let twice = c.bulk(&nightly, &BulkAction::Cancel, 2).await.unwrap();
    assert_eq!((twice.matched, twice.applied), (5, 0));
    assert_eq!(twice.skipped, BTreeMap::from([("WORKFLOW_FINISHED".to_string(), 5)]));

    // Resume them: they wait again, and a message finishes one.
    let resumed = c.bulk(&nightly, &BulkAction::Resume, 100).await.unwrap();
    assert_eq!((resumed.matched, resumed.applied), (5, 5), "{resumed:?}");
    c.send_message("n-0", "t", &json!("go"), None).await.unwrap();
    let done = c.await_workflow("n-0", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");

    // Delete the finished one by filter; the four still waiting are skipped.
    let deleted = c.bulk(&nightly, &BulkAction::Delete, 3).await.unwrap();
    assert_eq!((deleted.matched, deleted.applied), (5, 1));
    assert_eq!(
        deleted.skipped,
        BTreeMap::from([("WORKFLOW_NOT_FINISHED".to_string(), 4)])
    );
    assert_eq!(reason(&c.get("n-0").await.unwrap_err()), "WORKFLOW_NOT_FOUND");
    // Cancel and delete the rest by status and tag.
    c.bulk(&nightly, &BulkAction::Cancel, 100).await.unwrap();
    let cancelled = WorkflowFilter {
        statuses: vec![WorkflowStatus::Cancelled],
        ..nightly.clone()
    };
    let gone = c.bulk(&cancelled, &BulkAction::Delete, 100).await.unwrap();
    assert_eq!((gone.matched, gone.applied), (4, 4));
    assert_eq!(c.count_matching(&nightly).await.unwrap(), 0);
    let other = c.get("other").await.unwrap().status;
    assert!(!other.is_terminal(), "outside the filter: untouched ({other:?})");

    // A bad filter or batch size is refused.
    let e = c
        .bulk(
            &WorkflowFilter {
                tags: tags(&[("", "x")]),
                ..Default::default()
            },
            &BulkAction::Cancel,
            10,
        )
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "INVALID_ARGUMENT");
    let e = c.bulk(&nightly, &BulkAction::Cancel, -1).await.unwrap_err();
    assert_eq!(reason(&e), "INVALID_ARGUMENT", "a negative batch size");
}

waymark_integration_tests::on_both_stores!(
    tags_are_kept_inherited_by_children_and_listed_by,
    workflows_stranded_on_a_retired_version_are_re_pinned_one_or_by_filter,
    workflows_are_cancelled_resumed_and_deleted_by_filter_in_batches,
);
