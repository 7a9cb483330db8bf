//! Reading workflows back through the client API. A figure is printed only when the workflows it
//! counts are, in the store, what the workload meant them to be (SUCCESS with the right output,
//! or parked); otherwise the workload fails with a message that says what was found (the
//! caller names the workload, as context of the error).

use std::collections::BTreeMap;

use waymark_sdk::{Client, ListOptions, WorkflowInfo, WorkflowStatus};

pub const UNFINISHED: [WorkflowStatus; 3] = [
    WorkflowStatus::Enqueued,
    WorkflowStatus::Delayed,
    WorkflowStatus::Pending,
];

/// Whether any `workflow_name` workflow is in one of `statuses` (a page of one is enough).
pub async fn any_in(client: &Client, workflow_name: &str, statuses: &[WorkflowStatus]) -> anyhow::Result<bool> {
    let (page, _) = client
        .list(ListOptions {
            statuses: statuses.to_vec(),
            workflow_name: Some(workflow_name.into()),
            page_size: 1,
            ..Default::default()
        })
        .await?;
    Ok(!page.is_empty())
}

/// Which workflows a workload owns: those of a name and/or queue whose id starts with `prefix`.
pub struct Select<'a> {
    pub workflow_name: Option<&'a str>,
    pub queue: Option<&'a str>,
    /// Empty: every status.
    pub statuses: Vec<WorkflowStatus>,
    pub prefix: &'a str,
}

/// Every workflow `select` names, read page by page (1,000 a page, the server's largest).
pub async fn read_all(client: &Client, select: &Select<'_>) -> anyhow::Result<Vec<WorkflowInfo>> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let (page, next) = client
            .list(ListOptions {
                statuses: select.statuses.clone(),
                workflow_name: select.workflow_name.map(str::to_string),
                queue: select.queue.map(str::to_string),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await?;
        out.extend(page.into_iter().filter(|w| w.workflow_id.starts_with(select.prefix)));
        match next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// `n` with thousands separators, as the messages print counts.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Fails unless `found` holds exactly `expected` distinct workflows, each in `status`
/// and each passing `check` (which says what is wrong with one that does not).
pub fn expect(
    expected: usize,
    found: &[WorkflowInfo],
    status: WorkflowStatus,
    check: impl Fn(&WorkflowInfo) -> Result<(), String>,
) -> anyhow::Result<()> {
    let total = thousands(expected);
    let mut problems = Vec::new();
    let distinct: std::collections::HashSet<&str> = found.iter().map(|w| w.workflow_id.as_str()).collect();
    if distinct.len() != found.len() {
        problems.push(format!("{} ids listed twice", found.len() - distinct.len()));
    }
    if distinct.len() != expected {
        problems.push(format!(
            "found {} workflows, expected {total}",
            thousands(distinct.len())
        ));
    }
    // Other statuses, with one example each (its failure when it has one) to start looking.
    let mut others: BTreeMap<&'static str, (usize, &WorkflowInfo)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for w in found {
        if w.status != status {
            others.entry(w.status.as_str()).or_insert((0, w)).0 += 1;
        } else if let Err(why) = check(w) {
            wrong.push((w, why));
        }
    }
    for (name, (n, example)) in others {
        let verb = if example.status.is_terminal() {
            "ended"
        } else {
            "are still"
        };
        let failure = example.failure.as_ref().map(|f| {
            // Some SDKs put the kind in the message already.
            let message: String = f.message.chars().take(200).collect();
            if message.starts_with(&f.kind) {
                format!(": {message}")
            } else {
                format!(": {}: {message}", f.kind)
            }
        });
        let failure = failure.unwrap_or_default();
        problems.push(format!(
            "{} of {total} workflows {verb} {name}, not {} (e.g. {}{failure})",
            thousands(n),
            status.as_str(),
            example.workflow_id
        ));
    }
    if let Some((example, why)) = wrong.first() {
        problems.push(format!(
            "{} of {total} {} workflows are wrong (e.g. {}: {why})",
            thousands(wrong.len()),
            status.as_str(),
            example.workflow_id
        ));
    }
    anyhow::ensure!(problems.is_empty(), "{}", problems.join("; "));
    Ok(())
}

/// [`expect`] SUCCESS with exactly `output`.
pub fn expect_output(expected: usize, found: &[WorkflowInfo], output: &serde_json::Value) -> anyhow::Result<()> {
    expect(expected, found, WorkflowStatus::Success, |w| match &w.output {
        Some(o) if o == output => Ok(()),
        Some(o) => Err(format!("output {o}, expected {output}")),
        None => Err(format!("no output, expected {output}")),
    })
}

/// Fails unless exactly `n` `workflow_name` workflows with ids starting with `prefix`
/// are parked: DELAYED, with a wake time still ahead (so not about to be dispatched again).
pub async fn expect_parked(client: &Client, workflow_name: &str, prefix: &str, n: usize) -> anyhow::Result<()> {
    let select = Select {
        workflow_name: Some(workflow_name),
        queue: None,
        statuses: vec![],
        prefix,
    };
    let found = read_all(client, &select).await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    expect(n, &found, WorkflowStatus::Delayed, |w| {
        if w.wake_at_ms > now_ms {
            Ok(())
        } else {
            Err(format!("wake time {} is not ahead of now ({now_ms})", w.wake_at_ms))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_groups_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(thousands(12_345), "12,345");
    }
}
