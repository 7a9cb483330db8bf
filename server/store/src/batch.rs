//! Group commit: concurrent requests of one kind are gathered and written by one statement in
//! one transaction, so throughput is bounded by the database's commit rate rather than by one
//! round trip and one commit per request.
//!
//! A few lanes each take whatever is waiting (up to `max_batch`), write it, and answer every
//! request. A lone request goes straight through as a batch of one, so an idle system pays
//! nothing in latency; under load, requests that arrive while a batch is being written form
//! the next one.
//!
//! The queue in front of the lanes is bounded ([`QUEUED_BATCHES`] batches per lane): past it,
//! a caller waits to be queued, so a burst larger than the database can take is held by its
//! callers (each already holding its request) rather than by a list that grows in the server.

use std::{future::Future, sync::Arc};

use tokio::sync::{mpsc, oneshot, Mutex};

use crate::{StoreError, StoreResult};

type Job<Req, Resp> = (Req, oneshot::Sender<StoreResult<Resp>>);

/// Full batches per lane the queue holds before a caller waits to be queued: enough that the
/// next batches are ready while one is written, far below what would cost memory.
pub(crate) const QUEUED_BATCHES: usize = 8;

pub(crate) struct Batcher<Req, Resp> {
    tx: mpsc::Sender<Job<Req, Resp>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Batcher<Req, Resp> {
    /// Starts `lanes` writer tasks. `write` gets a batch and answers it: one result per
    /// request, in order, or one error for the whole batch.
    pub(crate) fn spawn<F, Fut>(lanes: usize, max_batch: usize, write: F) -> Self
    where
        F: Fn(Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<Resp>>> + Send + 'static,
    {
        let queue = lanes.max(1) * max_batch.max(1) * QUEUED_BATCHES;
        Self::spawn_with_queue(lanes, max_batch, queue, write)
    }

    /// [`Batcher::spawn`] with a queue of `queue` requests.
    fn spawn_with_queue<F, Fut>(lanes: usize, max_batch: usize, queue: usize, write: F) -> Self
    where
        F: Fn(Vec<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = StoreResult<Vec<Resp>>> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Job<Req, Resp>>(queue.max(1));
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
            .await
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

    // Attempt: with the writer stuck, far more requests than the queue holds. Outcome: the
    // queue holds its bound and no more, the rest wait to be queued (none is refused or lost),
    // and once the writer moves every request is answered.
    #[tokio::test]
    async fn the_queue_holds_its_bound_and_callers_wait_past_it() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let open = gate.clone();
        let b = Arc::new(Batcher::spawn_with_queue(1, 1, 4, move |reqs: Vec<u32>| {
            let gate = gate.clone();
            async move {
                gate.acquire().await.unwrap().forget();
                Ok(reqs)
            }
        }));
        let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..20u32 {
            let (b, answered) = (b.clone(), answered.clone());
            tasks.push(tokio::spawn(async move {
                let r = b.submit(i).await.unwrap();
                answered.lock().unwrap().push(r);
            }));
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while b.tx.capacity() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "the queue never filled");
            tokio::task::yield_now().await;
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(b.tx.capacity(), 0, "the queue is full");
        assert_eq!(b.tx.max_capacity(), 4, "and holds no more than its bound");
        assert!(
            answered.lock().unwrap().is_empty(),
            "nothing answered while the writer is stuck"
        );
        assert_eq!(
            tasks.iter().filter(|t| t.is_finished()).count(),
            0,
            "no caller was refused"
        );
        open.add_permits(1_000);
        for t in tasks {
            t.await.unwrap();
        }
        let mut answered = answered.lock().unwrap().clone();
        answered.sort();
        assert_eq!(
            answered,
            (0..20).collect::<Vec<_>>(),
            "every request answered, each its own"
        );
    }

    #[tokio::test]
    async fn a_failed_batch_fails_each_of_its_requests() {
        let b = Batcher::spawn(2, 8, |_reqs: Vec<u32>| async {
            Err::<Vec<u32>, _>(StoreError::Unavailable("down".into()))
        });
        assert!(matches!(b.submit(1).await, Err(StoreError::Unavailable(m)) if m.contains("down")));
    }
}
