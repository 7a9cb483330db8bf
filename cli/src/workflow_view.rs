//! How `waymark workflow …` shows workflows and their steps: JSON for programs, tables and
//! short lines for people.

use waymark_sdk::{StepInfo, WorkflowInfo};

use super::output;

pub(super) fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serializes"));
}

/// One workflow, as JSON or as the readable table.
pub(super) fn show(w: &WorkflowInfo, json: bool) {
    if json {
        print_json(w)
    } else {
        print_workflow(w)
    }
}

fn print_workflow(w: &WorkflowInfo) {
    let mut rows = vec![
        ("id", w.workflow_id.clone()),
        ("name", w.workflow_name.clone()),
        ("status", w.status.as_str().to_string()),
        ("queue", w.queue_name.clone()),
        (
            "app version",
            if w.app_version.is_empty() {
                "-".into()
            } else {
                w.app_version.clone()
            },
        ),
        ("input", w.input.to_string()),
    ];
    if let Some(o) = &w.output {
        rows.push(("output", o.to_string()));
    }
    if let Some(f) = &w.failure {
        rows.push(("failure", format!("{}: {}", f.kind, f.message)));
    }
    rows.push(("created", output::time(w.created_at_ms)));
    rows.push(("updated", output::time(w.updated_at_ms)));
    rows.push(("recoveries", w.recovery_attempts.to_string()));
    rows.push(("epoch", w.epoch.to_string()));
    if !w.worker_id.is_empty() {
        rows.push(("worker", w.worker_id.clone()));
    }
    if w.priority != 0 {
        rows.push(("priority", w.priority.to_string()));
    }
    if !w.partition_key.is_empty() {
        rows.push(("partition", w.partition_key.clone()));
    }
    if !w.dedup_id.is_empty() {
        rows.push(("dedup id", w.dedup_id.clone()));
    }
    if w.started_at_ms != 0 {
        rows.push(("started", output::time(w.started_at_ms)));
    }
    if w.wake_at_ms != 0 {
        rows.push(("runs at", output::time(w.wake_at_ms)));
    }
    if let Some(waiting) = &w.waiting_on {
        let until = match waiting.until_ms() {
            0 => String::new(),
            ms => format!(" until {}", output::time(ms)),
        };
        rows.push(("waiting on", format!("{}{until}", waiting.describe())));
    }
    if !w.traceparent.is_empty() {
        rows.push(("trace", w.traceparent.clone()));
    }
    if !w.forked_from_workflow_id.is_empty() {
        let from = format!("{} at step {}", w.forked_from_workflow_id, w.forked_from_step);
        rows.push(("forked from", from));
    }
    if w.run > 0 && w.continued_as_workflow_id.is_empty() {
        rows.push(("run", format!("{} (continued as new {} times)", w.run, w.run)));
    }
    if !w.continued_as_workflow_id.is_empty() {
        rows.push((
            "continued as",
            format!("{} (this was its run {})", w.continued_as_workflow_id, w.run),
        ));
    }
    if !w.tags.is_empty() {
        let tags: Vec<String> = w.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        rows.push(("tags", tags.join(" ")));
    }
    for (k, v) in rows {
        println!("{k:<12} {v}");
    }
}

/// The console's page of a workflow, under the table, when the server serves a console. Asked
/// of the server (WhoAmI); a server that cannot say (an older one, a key that may not ask) gets
/// no line rather than an error.
pub(super) async fn print_console_link(c: &waymark_sdk::Client, namespace: Option<&str>, workflow_id: &str) {
    let Ok(me) = c.who_am_i().await else { return };
    let Some(base) = me.console_url else { return };
    // The namespace the call acted in: the one named, else the key's only one, else default.
    let ns = match (namespace, me.key.as_ref().map(|k| k.namespaces.as_slice())) {
        (Some(n), _) => n.to_string(),
        (None, Some([only])) if only != "*" => only.clone(),
        _ => "default".to_string(),
    };
    let info = waymark_server::console::ConsoleInfo {
        url: Some(base),
        read_only: me.console_read_only,
    };
    if let Some(url) = info.workflow_url(&ns, workflow_id) {
        println!("{:<12} {url}", "console");
    }
}

pub(super) fn print_steps(steps: &[StepInfo]) {
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|s| {
            let result = match (&s.output, &s.failure) {
                (_, Some(f)) => format!("failed: {}", f.message),
                (Some(o), None) => output::short(o, 60),
                (None, None) => "null".into(),
            };
            vec![
                s.step_id.to_string(),
                s.name.clone(),
                result,
                s.attempts.to_string(),
                s.epoch.to_string(),
                output::time(s.recorded_at_ms),
                // From its start (when the server knows it) to its checkpoint.
                s.started_at_ms
                    .map_or("-".into(), |at| format!("{} ms", (s.recorded_at_ms - at).max(0))),
            ]
        })
        .collect();
    output::table(
        &["STEP", "NAME", "RESULT", "ATTEMPTS", "EPOCH", "RECORDED", "TOOK"],
        &rows,
    );
}
