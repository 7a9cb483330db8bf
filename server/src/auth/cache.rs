//! Keys recently read from the database, so a call costs no round trip to check its key. An
//! entry is trusted for the cache's time to live and then read again: that is how long a
//! revocation (or an expiry written elsewhere) takes to reach a replica that did not make it.
//! Unknown key ids are remembered the same way, so a client repeating a bad key does not reach
//! the database either.
//!
//! The cache is `moka`'s: bounded to `capacity` keys with O(1) eviction and no lock shared by
//! every call, and concurrent misses of one key id wait for a single read. A read that fails
//! (the database away) is not remembered.

use std::{future::Future, time::Duration};

use waymark_store::ApiKeyRecord;

use crate::engine::EngineResult;

pub struct KeyCache {
    /// `None` when the time to live is zero (every check reads the database).
    keys: Option<moka::future::Cache<String, Option<ApiKeyRecord>>>,
    /// Key ids read as existing within the last hour: reading one again when its entry above
    /// has gone stale is a real client's refresh, never a made-up key's, so the per-address
    /// bound on reads of unknown keys does not apply to it.
    existing: moka::sync::Cache<String, ()>,
}

impl KeyCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        let keys = (!ttl.is_zero()).then(|| {
            moka::future::Cache::builder()
                .max_capacity(capacity.max(1) as u64)
                .time_to_live(ttl)
                .build()
        });
        let existing = moka::sync::Cache::builder()
            .max_capacity(capacity.max(1) as u64)
            .time_to_live(Duration::from_secs(3600))
            .build();
        KeyCache { keys, existing }
    }

    /// Whether `key_id` was read as an existing key lately.
    pub fn known_to_exist(&self, key_id: &str) -> bool {
        self.existing.contains_key(key_id)
    }

    /// The cached answer for `key_id`, if there is a fresh one.
    pub async fn get(&self, key_id: &str) -> Option<Option<ApiKeyRecord>> {
        self.keys.as_ref()?.get(key_id).await
    }

    /// The answer for `key_id`: cached, or from `read` (once for every caller waiting on the
    /// same key id), remembered when it succeeds.
    pub async fn get_or_read(
        &self,
        key_id: &str,
        read: impl Future<Output = EngineResult<Option<ApiKeyRecord>>>,
    ) -> EngineResult<Option<ApiKeyRecord>> {
        let found = match &self.keys {
            None => read.await,
            Some(keys) => keys.try_get_with_by_ref(key_id, read).await.map_err(|e| (*e).clone()),
        }?;
        if found.is_some() {
            self.existing.insert(key_id.to_string(), ());
        }
        Ok(found)
    }

    /// Forgets a key at once (revoked through this replica).
    pub async fn forget(&self, key_id: &str) {
        if let Some(keys) = &self.keys {
            keys.invalidate(key_id).await;
        }
    }

    /// Keys held (after pending evictions are applied).
    pub async fn entries(&self) -> u64 {
        match &self.keys {
            None => 0,
            Some(keys) => {
                keys.run_pending_tasks().await;
                keys.entry_count()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> ApiKeyRecord {
        ApiKeyRecord {
            key_id: id.into(),
            secret_sha256: String::new(),
            name: String::new(),
            role: "reader".into(),
            namespaces: vec![],
            name_patterns: vec![],
            created_at: 0,
            expires_at: None,
            revoked_at: None,
        }
    }

    #[tokio::test]
    async fn answers_are_remembered_failures_are_not() {
        let c = KeyCache::new(Duration::from_secs(60), 10);
        let reads = std::sync::atomic::AtomicU32::new(0);
        let read = |found: bool| {
            let reads = &reads;
            async move {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(found.then(|| record("a")))
            }
        };
        assert_eq!(c.get_or_read("a", read(true)).await.unwrap(), Some(record("a")));
        assert_eq!(
            c.get_or_read("a", read(false)).await.unwrap(),
            Some(record("a")),
            "cached"
        );
        assert_eq!(c.get_or_read("b", read(false)).await.unwrap(), None);
        assert_eq!(
            c.get_or_read("b", read(true)).await.unwrap(),
            None,
            "unknown ids are remembered"
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(c.known_to_exist("a") && !c.known_to_exist("b"));
        let failed = c
            .get_or_read("c", async { Err(crate::engine::EngineError::invalid("away")) })
            .await;
        assert!(failed.is_err());
        assert_eq!(c.get("c").await, None, "a failed read is not remembered");
        c.forget("a").await;
        assert_eq!(c.get("a").await, None);
    }

    #[tokio::test]
    async fn the_cache_never_holds_more_than_its_capacity() {
        let c = KeyCache::new(Duration::from_secs(60), 50);
        for i in 0..1_000 {
            c.get_or_read(&format!("k{i}"), async { Ok(None) }).await.unwrap();
            let id = format!("real{i}");
            c.get_or_read(&id, async { Ok(Some(record(&id))) }).await.unwrap();
        }
        assert!(c.entries().await <= 50, "{}", c.entries().await);
        c.existing.run_pending_tasks();
        assert!(
            c.existing.entry_count() <= 50,
            "ids known to exist: {}",
            c.existing.entry_count()
        );
    }

    #[tokio::test]
    async fn a_zero_time_to_live_reads_every_time() {
        let c = KeyCache::new(Duration::ZERO, 10);
        c.get_or_read("a", async { Ok(Some(record("a"))) }).await.unwrap();
        assert_eq!(c.get("a").await, None);
        assert_eq!(c.get_or_read("a", async { Ok(None) }).await.unwrap(), None);
    }
}
