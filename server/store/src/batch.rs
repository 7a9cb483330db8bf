//! Group commit: concurrent requests of one kind are gathered and written by one statement in
//! one transaction, so throughput is bounded by the database's commit rate rather than by one
//! round trip and one commit per request.
//!
//! A few lanes each take whatever is waiting (up to `max_batch`), write it, and answer every
//! request. A lone request goes straight through as a batch of one, so an idle system pays
//! nothing in latency; under load, requests that arrive while a batch is being written form
//! the next one.

use std::{future::Future, sync::Arc};

use tokio::sync::{mpsc, oneshot, Mutex};

use crate::{StoreError, StoreResult};

type Job<Req, Resp> = (Req, oneshot::Sender<StoreResult<Resp>>);

pub(crate) struct Batcher<Req, Resp> {
    tx: mpsc::UnboundedSender<Job<Req, Resp>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Batcher<Req, Resp> {
    /// Starts `lanes` writer tasks. `write` gets a batch and answers it: one result per
    /// request, in order, or one error for the whole batch.
    pub(crate) fn spawn<F, Fut>(lanes: usize, max_batch: usize, write: F) -> Self
    where
        F: Fn(Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<Resp>>> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel::<Job<Req, Resp>>();
        let rx = Arc::new(Mutex::new(rx));
        let write = Arc::new(write);
        for _ in 0..lanes.max(1) {
            let (rx, write) = (rx.clone(), write.clone());
            tokio::spawn(async move {
                loop {
                    let mut jobs = Vec::new();
                    {
                        let mut rx = rx.lock().await;
                        match rx.recv().await {
                            Some(job) => jobs.push(job),
                            None => return,
                        }
                        while jobs.len() < max_batch {
                            match rx.try_recv() {
                                Ok(job) => jobs.push(job),
                                Err(_) => break,
                            }
                        }
                    }
                    let (reqs, replies): (Vec<Req>, Vec<_>) = jobs.into_iter().unzip();
                    let n = reqs.len();
                    match write(reqs).await {
                        Ok(results) if results.len() == n => {
                            for (reply, result) in replies.into_iter().zip(results) {
                                let _ = reply.send(Ok(result));
                            }
                        }
                        Ok(_) => {
                            for reply in replies {
                                let _ = reply.send(Err(StoreError::Unavailable(
                                    "batch answered the wrong number of requests".into(),
                                )));
                            }
                        }
                        Err(e) => {
                            let text = e.to_string();
                            for reply in replies {
                                let _ = reply.send(Err(StoreError::Unavailable(text.clone())));
                            }
                        }
                    }
                }
            });
        }
        Batcher { tx }
    }

    pub(crate) async fn submit(&self, req: Req) -> StoreResult<Resp> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((req, reply))
            .map_err(|_| StoreError::Unavailable("the store's writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the store's writer has stopped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_every_request_in_order_and_gathers_concurrent_ones() {
        let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let b = Arc::new(Batcher::spawn(1, 64, move |reqs: Vec<u32>| {
            seen.lock().unwrap().push(reqs.len());
            async move {
                tokio::task::yield_now().await;
                Ok(reqs.into_iter().map(|r| r * 2).collect())
            }
        }));
        let mut tasks = Vec::new();
        for i in 0..200u32 {
            let b = b.clone();
            tasks.push(tokio::spawn(async move { (i, b.submit(i).await.unwrap()) }));
        }
        for t in tasks {
            let (i, doubled) = t.await.unwrap();
            assert_eq!(doubled, i * 2);
        }
        let sizes = sizes.lock().unwrap();
        assert_eq!(sizes.iter().sum::<usize>(), 200);
        assert!(sizes.iter().all(|s| *s <= 64));
    }

    #[tokio::test]
    async fn a_failed_batch_fails_each_of_its_requests() {
        let b = Batcher::spawn(2, 8, |_reqs: Vec<u32>| async {
            Err::<Vec<u32>, _>(StoreError::Unavailable("down".into()))
        });
        assert!(matches!(b.submit(1).await, Err(StoreError::Unavailable(m)) if m.contains("down")));
    }
}
