//! A client's messages, events and streams: send to a workflow, read what it was sent, read
//! (and wait for) its events, follow its streams.

use std::time::Duration;

use serde::Serialize;
use waymark_proto::{json, v1};

use crate::{Client, Error, EventInfo, MessageInfo};

impl Client {
    /// Sends a message to a workflow on `topic` ("" is the default topic). With an idempotency
    /// key, a retried send is delivered once. Returns the message id and whether it was a
    /// duplicate of an earlier send with the same key.
    pub async fn send_message<M: Serialize>(
        &self,
        workflow_id: &str,
        topic: &str,
        message: &M,
        idempotency_key: Option<&str>,
    ) -> Result<(String, bool), Error> {
        let req = v1::SendMessageRequest {
            workflow_id: workflow_id.into(),
            topic: topic.into(),
            message: Some(json::to_payload(&serde_json::to_value(message)?)),
            idempotency_key: idempotency_key.unwrap_or_default().into(),
        };
        let r = crate::resend::retrying(self.keyed_resend(idempotency_key), || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.send_message(req).await }
        })
        .await?
        .into_inner();
        Ok((r.message_id, r.duplicate))
    }

    /// How long a send with `idempotency_key` may be sent again while the server is away: only
    /// a keyed send is safe to send again, since without a key it could be delivered twice.
    pub(crate) fn keyed_resend(&self, idempotency_key: Option<&str>) -> Duration {
        if idempotency_key.is_some() {
            self.resend_for
        } else {
            Duration::ZERO
        }
    }

    /// Every message sent to a workflow, consumed or not, oldest first.
    pub async fn messages(&self, workflow_id: &str) -> Result<Vec<MessageInfo>, Error> {
        crate::pages::read_all(|page_token| async move {
            let req = v1::ListMessagesRequest {
                workflow_id: workflow_id.into(),
                page_size: 0,
                page_token,
            };
            let r = crate::resend::retrying(self.resend_for, || {
                let (mut c, req) = (self.rpc.clone(), req.clone());
                async move { c.list_messages(req).await }
            })
            .await?
            .into_inner();
            Ok((
                r.messages.into_iter().map(MessageInfo::from).collect(),
                r.next_page_token,
            ))
        })
        .await
    }

    /// The current value of a workflow's event. With a timeout, waits up to that long (at most
    /// 24 hours) for it to be set. `None` when it is not set (in time).
    pub async fn get_event(
        &self,
        workflow_id: &str,
        key: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<serde_json::Value>, Error> {
        // Resent within the caller's timeout: each attempt waits only for what is left of it.
        let until = timeout.map(|t| tokio::time::Instant::now() + t);
        let bound = timeout.map_or(self.resend_for, |t| t.min(self.resend_for));
        let r = crate::resend::retrying(bound, || {
            let mut c = self.rpc.clone();
            let left = until.map(|u| u.saturating_duration_since(tokio::time::Instant::now()));
            let mut req = tonic::Request::new(v1::GetEventRequest {
                workflow_id: workflow_id.into(),
                key: key.into(),
                timeout: left.map(|t| prost_types::Duration {
                    seconds: t.as_secs() as i64,
                    nanos: t.subsec_nanos() as i32,
                }),
            });
            if let Some(t) = left {
                // Room for the server to answer "not set" itself.
                req.set_timeout(t + Duration::from_secs(5));
            }
            async move { c.get_event(req).await }
        })
        .await?
        .into_inner();
        Ok(r.found
            .then(|| json::from_payload(r.value.as_ref()).unwrap_or(serde_json::Value::Null)))
    }

    /// Every event of a workflow, with the history of its values.
    pub async fn events(&self, workflow_id: &str) -> Result<Vec<EventInfo>, Error> {
        crate::pages::read_all(|page_token| async move {
            let req = v1::ListEventsRequest {
                workflow_id: workflow_id.into(),
                page_size: 0,
                page_token,
            };
            let r = crate::resend::retrying(self.resend_for, || {
                let (mut c, req) = (self.rpc.clone(), req.clone());
                async move { c.list_events(req).await }
            })
            .await?
            .into_inner();
            Ok((r.events.into_iter().map(EventInfo::from).collect(), r.next_page_token))
        })
        .await
    }

    /// Follows a workflow's stream `key` from offset `from`: yields `(offset, value)` as values
    /// are written, and ends when the stream is closed or the workflow has finished.
    pub async fn read_stream(
        &self,
        workflow_id: &str,
        key: &str,
        from: u64,
    ) -> Result<impl futures::Stream<Item = Result<(u64, serde_json::Value), Error>> + Send + 'static, Error> {
        use futures::StreamExt;
        let stream = self
            .rpc
            .clone()
            .read_stream(v1::ReadStreamRequest {
                workflow_id: workflow_id.into(),
                key: key.into(),
                from_offset: from,
            })
            .await?
            .into_inner();
        Ok(stream.map(|item| {
            let item = item?;
            Ok((
                item.offset,
                json::from_payload(item.value.as_ref()).unwrap_or(serde_json::Value::Null),
            ))
        }))
    }
}
