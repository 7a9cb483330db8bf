//! Keys recently read from the database, so a call costs no round trip to check its key. An
//! entry is trusted for the cache's time to live and then read again: that is how long a
//! revocation (or an expiry written elsewhere) takes to reach a replica that did not make it.
//! Unknown key ids are remembered the same way, so a client repeating a bad key does not reach
//! the database either. The cache holds at most `capacity` keys.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use tokio::time::Instant;
use waymark_store::ApiKeyRecord;

pub struct KeyCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    /// `None`: the database has no such key.
    key: Option<ApiKeyRecord>,
    read_at: Instant,
}

/// What the cache knows of a key id.
pub enum Cached {
    Known(Option<ApiKeyRecord>),
    /// Never read, or read longer ago than the time to live.
    Stale,
}

impl KeyCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        KeyCache {
            ttl,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, key_id: &str) -> Cached {
        let entries = self.entries.lock().unwrap();
        match entries.get(key_id) {
            Some(e) if e.read_at.elapsed() < self.ttl => Cached::Known(e.key.clone()),
            _ => Cached::Stale,
        }
    }

    pub fn put(&self, key_id: &str, key: Option<ApiKeyRecord>) {
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= self.capacity && !entries.contains_key(key_id) {
            // Full: drop what has gone stale; if everything is fresh, the oldest read.
            let ttl = self.ttl;
            entries.retain(|_, e| e.read_at.elapsed() < ttl);
            if entries.len() >= self.capacity {
                if let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.read_at).map(|(k, _)| k.clone()) {
                    entries.remove(&oldest);
                }
            }
        }
        entries.insert(
            key_id.to_string(),
            Entry {
                key,
                read_at: Instant::now(),
            },
        );
    }

    /// Forgets a key at once (revoked through this replica).
    pub fn forget(&self, key_id: &str) {
        self.entries.lock().unwrap().remove(key_id);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_go_stale_after_the_time_to_live() {
        let c = KeyCache::new(Duration::from_secs(5), 10);
        c.put("a", None);
        assert!(matches!(c.get("a"), Cached::Known(None)));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(matches!(c.get("a"), Cached::Stale));
        assert!(matches!(c.get("b"), Cached::Stale));
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_never_holds_more_than_its_capacity() {
        let c = KeyCache::new(Duration::from_secs(5), 3);
        for i in 0..100 {
            c.put(&format!("k{i}"), None);
            tokio::time::advance(Duration::from_millis(1)).await;
            assert!(c.len() <= 3);
        }
        // The newest stay; the oldest went first.
        assert!(matches!(c.get("k99"), Cached::Known(None)));
        assert!(matches!(c.get("k0"), Cached::Stale));
        c.forget("k99");
        assert!(matches!(c.get("k99"), Cached::Stale));
    }
}
