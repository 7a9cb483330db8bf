//! The queues service: queues as server resources, created, changed, read and removed by
//! operators; created without limits when a worker declares one; checked when a workflow is
//! started on one. It owns what this replica knows of the queues and their limits.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use waymark_store::{QueueLimits, QueueRecord, QueueUpdate, RateLimit, DEFAULT_QUEUE};

use super::{validate, Core, EngineError, EngineResult, ErrorCode};

/// Longest rate-limit window: a day.
const MAX_RATE_PERIOD_MS: i64 = 24 * 3600 * 1000;

fn limit(field: &str, v: Option<u32>) -> EngineResult<()> {
    match v {
        Some(0) => Err(EngineError::invalid(format!(
            "{field} must be at least 1 (leave it unset for no limit)"
        ))),
        _ => Ok(()),
    }
}

fn rate(r: Option<RateLimit>) -> EngineResult<()> {
    match r {
        Some(r) if r.max_starts == 0 => Err(EngineError::invalid("rate limit max_starts must be at least 1")),
        Some(r) if !(1..=MAX_RATE_PERIOD_MS).contains(&r.period_ms) => Err(EngineError::invalid(
            "rate limit period must be between 1 ms and 24 hours",
        )),
        _ => Ok(()),
    }
}

fn validate_limits(l: &QueueLimits) -> EngineResult<()> {
    limit("worker_concurrency", l.worker_concurrency)?;
    limit("global_concurrency", l.global_concurrency)?;
    limit("partition_concurrency", l.partition_concurrency)?;
    rate(l.rate_limit)
}

pub(crate) fn queue_not_found(name: &str) -> EngineError {
    EngineError::new(
        ErrorCode::NotFound,
        "QUEUE_NOT_FOUND",
        format!("queue {name:?} does not exist; create it (waymark queue create) or let a worker declare it"),
    )
}

/// Queues: the operators' calls, and the limits every start and claim consults.
pub struct Queues {
    core: Arc<Core>,
    /// Queues known to exist, with their limits as last read: which queues this replica claims
    /// one at a time under their lock, and which it may dispatch directly (see [`Queues::check`]).
    known: RwLock<HashMap<String, QueueLimits>>,
}

impl Queues {
    pub(crate) fn new(core: Arc<Core>) -> Queues {
        Queues {
            core,
            known: Default::default(),
        }
    }

    pub async fn create(&self, name: &str, limits: QueueLimits) -> EngineResult<QueueRecord> {
        validate::name("queue name", name)?;
        validate_limits(&limits)?;
        let q = self.core.store.create_queue(name, &limits, self.core.now()).await?;
        self.remember(&q);
        Ok(q)
    }

    pub async fn update(&self, name: &str, update: QueueUpdate) -> EngineResult<QueueRecord> {
        validate::name("queue name", name)?;
        for (field, v) in [
            ("worker_concurrency", update.worker_concurrency),
            ("global_concurrency", update.global_concurrency),
            ("partition_concurrency", update.partition_concurrency),
        ] {
            limit(field, v.flatten())?;
        }
        rate(update.rate_limit.flatten())?;
        let q = self.core.store.update_queue(name, &update, self.core.now()).await?;
        self.remember(&q);
        Ok(q)
    }

    pub async fn get(&self, name: &str) -> EngineResult<QueueRecord> {
        validate::name("queue name", name)?;
        self.core
            .store
            .get_queue(name)
            .await?
            .ok_or_else(|| queue_not_found(name))
    }

    /// What queues hold now (only `queue`'s when given), read from the database.
    pub async fn counts_now(&self, queue: Option<&str>) -> EngineResult<Vec<waymark_store::QueueCounts>> {
        Ok(self.core.store.queue_counts(queue).await?)
    }

    pub async fn list(&self) -> EngineResult<Vec<QueueRecord>> {
        Ok(self.core.store.list_queues().await?)
    }

    pub async fn delete(&self, name: &str) -> EngineResult<()> {
        validate::name("queue name", name)?;
        if name == DEFAULT_QUEUE {
            return Err(EngineError::new(
                ErrorCode::FailedPrecondition,
                "QUEUE_PROTECTED",
                "the default queue cannot be deleted",
            ));
        }
        self.known.write().unwrap().remove(name);
        // A deleted queue's dispatch rate is forgotten with it.
        self.core.counters.forget_queue(name);
        if self.core.store.delete_queue(name).await? {
            Ok(())
        } else {
            Err(queue_not_found(name))
        }
    }

    /// Refuses a start on a queue that does not exist, and returns its limits. Queues seen to
    /// exist are remembered, so starts on them cost no read. The memory is refreshed when
    /// another replica announces a change and every [`QUEUE_REFRESH_TICKS`] dispatcher polls;
    /// until then a queue deleted elsewhere is still accepted here (its workflows wait until it
    /// is created again), and limits set elsewhere are still kept: the store judges a queue by
    /// its stored row whenever it claims or directly dispatches.
    pub(crate) async fn check(&self, name: &str) -> EngineResult<QueueLimits> {
        if let Some(limits) = self.known.read().unwrap().get(name) {
            return Ok(limits.clone());
        }
        match self.core.store.get_queue(name).await? {
            Some(q) => {
                self.remember(&q);
                Ok(q.limits)
            }
            None => Err(queue_not_found(name)),
        }
    }

    fn remember(&self, q: &QueueRecord) {
        self.known.write().unwrap().insert(q.name.clone(), q.limits.clone());
    }

    /// Re-reads every queue: after another replica announced a change, and now and then.
    pub(crate) async fn refresh(&self) {
        match self.core.store.list_queues().await {
            Ok(queues) => {
                *self.known.write().unwrap() = queues.into_iter().map(|q| (q.name, q.limits)).collect();
            }
            Err(e) => tracing::warn!(error = %e, "reading queues failed; keeping what was known"),
        }
    }

    /// Which of `queues` have limits, as far as this replica knows.
    pub(crate) fn limited(&self, queues: &[String]) -> Vec<String> {
        let known = self.known.read().unwrap();
        queues
            .iter()
            .filter(|q| known.get(q.as_str()).is_some_and(|l| l.any()))
            .cloned()
            .collect()
    }
}

/// The dispatcher re-reads the queues every this many polls (see `check_queue`).
pub(crate) const QUEUE_REFRESH_TICKS: u64 = 20;
