//! Reading workflows back through the client API.

use waymark_sdk::{Client, ListOptions, WorkflowStatus};

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
