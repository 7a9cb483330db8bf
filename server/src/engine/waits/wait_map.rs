//! Client calls parked on this replica until something happens to a key: a workflow finishing,
//! an event being set, a stream growing. Each wait is a guard: dropping it (the call answered,
//! timed out, or the client went away) removes its entry, and the key's too when it was the
//! last. So waits on keys that never come — a workflow id that does not exist, an event never
//! set — leave nothing behind, however many there are.

use std::{
    collections::HashMap,
    future::Future,
    hash::Hash,
    pin::Pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
    task::{Context, Poll},
};

use tokio::sync::oneshot;

/// The waits on one key, each with its number.
type Waiting<T> = Vec<(u64, oneshot::Sender<T>)>;

pub struct WaitMap<K, T> {
    by_key: Mutex<HashMap<K, Waiting<T>>>,
    next_id: AtomicU64,
}

impl<K, T> Default for WaitMap<K, T> {
    fn default() -> Self {
        WaitMap {
            by_key: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        }
    }
}

/// One registered wait. Resolves with what the waker sent, or `None` when the entry was
/// removed without a value.
pub struct Wait<'a, K: Eq + Hash, T> {
    map: &'a WaitMap<K, T>,
    key: Option<K>,
    id: u64,
    rx: oneshot::Receiver<T>,
}

impl<K: Eq + Hash + Clone, T: Clone> WaitMap<K, T> {
    /// Registers interest in `key`. Register before reading the state you wait on, so a change
    /// between the read and the wait is not missed.
    pub fn wait(&self, key: K) -> Wait<'_, K, T> {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.by_key
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_default()
            .push((id, tx));
        Wait {
            map: self,
            key: Some(key),
            id,
            rx,
        }
    }

    /// Wakes every wait on `key` with `value`.
    pub fn wake(&self, key: &K, value: T) {
        let list = self.by_key.lock().unwrap().remove(key);
        for (_, tx) in list.into_iter().flatten() {
            let _ = tx.send(value.clone());
        }
    }

    /// Wakes every wait whose key matches.
    pub fn wake_matching(&self, matches: impl Fn(&K) -> bool, value: T) {
        let woken: Vec<_> = {
            let mut map = self.by_key.lock().unwrap();
            let keys: Vec<K> = map.keys().filter(|k| matches(k)).cloned().collect();
            keys.into_iter().filter_map(|k| map.remove(&k)).flatten().collect()
        };
        for (_, tx) in woken {
            let _ = tx.send(value.clone());
        }
    }

    /// The keys waited on now.
    pub fn keys(&self) -> Vec<K> {
        self.by_key.lock().unwrap().keys().cloned().collect()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.by_key.lock().unwrap().is_empty()
    }

    /// Waits registered now.
    pub fn len(&self) -> usize {
        self.by_key.lock().unwrap().values().map(Vec::len).sum()
    }
}

impl<K: Eq + Hash, T> Unpin for Wait<'_, K, T> {}

impl<K: Eq + Hash + Clone, T: Clone> Future for Wait<'_, K, T> {
    type Output = Option<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.rx).poll(cx).map(Result::ok)
    }
}

impl<K: Eq + Hash, T> Drop for Wait<'_, K, T> {
    fn drop(&mut self) {
        // A woken wait's entry is gone already; only the ones still registered are looked up.
        if let Some(key) = self.key.take() {
            if let Ok(mut map) = self.map.by_key.lock() {
                if let Some(list) = map.get_mut(&key) {
                    list.retain(|(i, _)| *i != self.id);
                    if list.is_empty() {
                        map.remove(&key);
                        // A burst of waits grew the table; give the room back once most of it
                        // is empty (halving at most as often as it doubled).
                        if map.capacity() > 64 && map.len() * 4 < map.capacity() {
                            map.shrink_to_fit();
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_only_the_waits_on_that_key() {
        let m = WaitMap::<String, u8>::default();
        let a1 = m.wait("a".into());
        let a2 = m.wait("a".into());
        let b = m.wait("b".into());
        m.wake(&"a".to_string(), 7);
        assert_eq!(a1.await, Some(7));
        assert_eq!(a2.await, Some(7));
        assert_eq!(m.len(), 1, "b is still waiting");
        drop(b);
        assert_eq!(m.len(), 0);
    }

    #[test]
    fn waits_that_end_unwoken_leave_nothing_behind() {
        let m = WaitMap::<String, ()>::default();
        let waits: Vec<_> = (0..10_000).map(|i| m.wait(format!("missing-{i}"))).collect();
        assert_eq!(m.len(), 10_000);
        let kept = m.wait("missing-3".into());
        drop(waits);
        assert_eq!(m.len(), 1);
        assert_eq!(m.keys(), vec!["missing-3".to_string()]);
        drop(kept);
        assert_eq!(m.len(), 0);
        assert!(m.keys().is_empty());
        assert!(
            m.by_key.lock().unwrap().capacity() <= 64,
            "the burst's room was given back"
        );
    }

    #[tokio::test]
    async fn wake_matching_wakes_every_matching_key() {
        let m = WaitMap::<(String, String), ()>::default();
        let x = m.wait(("w".into(), "x".into()));
        let y = m.wait(("w".into(), "y".into()));
        let other = m.wait(("v".into(), "x".into()));
        m.wake_matching(|(w, _)| w == "w", ());
        assert_eq!(x.await, Some(()));
        assert_eq!(y.await, Some(()));
        assert_eq!(m.len(), 1);
        drop(other);
    }
}
