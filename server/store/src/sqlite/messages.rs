//! The send that ends a waiting receive, on SQLite: the shared send and receive
//! (`shared/messages.rs`) in one transaction on the one writer connection.

use super::SqliteStore;
use crate::rows::db_error;
use crate::shared::fencing::fenced_step;
use crate::shared::messages::{insert_message, take_oldest};
use crate::*;

impl SqliteStore {
    pub(super) async fn send_delivering(
        &self,
        m: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let sent = insert_message::<SqliteStore>(&mut tx, &m, now).await?;
        let mut delivered = None;
        // The single writer connection: nothing can record the waiter's step in between.
        if !sent.duplicate
            && waiter.deadline > now
            && matches!(
                fenced_step::<SqliteStore>(&mut tx, &waiter.fence, waiter.step_id).await,
                Ok(None)
            )
        {
            if let Some(Received::Delivered(p)) =
                take_oldest::<SqliteStore>(&mut tx, &waiter.fence, waiter.step_id, &m.topic, waiter.deadline, now)
                    .await?
            {
                delivered = Some(p);
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok((sent, delivered))
    }
}
