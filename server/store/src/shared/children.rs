//! Child workflows: which workflows one started. (Starting and awaiting a child are composed by
//! the engine from table operations; the child's insert is `Transaction::insert_child`.)

use crate::dialect::Backend;
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Children for B {
    #[tracing::instrument(name = "store.children", level = "debug", target = "waymark::store", skip_all)]
    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>> {
        B::query_scalar(
            "SELECT workflow_id FROM workflows WHERE parent_workflow_id = $1 ORDER BY created_at, workflow_id",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}
