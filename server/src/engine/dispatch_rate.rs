//! How many workflows this replica dispatched from each queue in each of the last minutes: what
//! a queue's `dispatched_per_minute` reports (the console draws it). Kept in memory, per
//! replica: a ring of one-minute buckets per queue, a bucket reused once its minute has passed
//! out of the window. At most [`MAX_QUEUES`] queues are followed; dispatches from others go
//! uncounted here (the metrics still have them).

use std::{collections::HashMap, sync::Mutex};

use waymark_store::Millis;

/// Minutes reported, the current one included.
pub const MINUTES: usize = 15;
/// Most queues followed.
pub const MAX_QUEUES: usize = 1000;

const MINUTE_MS: Millis = 60_000;

/// A queue's buckets: (minute since the epoch, dispatches in it), at `minute % MINUTES`.
type Ring = [(i64, u32); MINUTES];

#[derive(Default)]
pub struct DispatchRate(Mutex<HashMap<String, Ring>>);

impl DispatchRate {
    /// One dispatch from `queue` at `now`.
    pub fn count(&self, queue: &str, now: Millis) {
        let minute = now.div_euclid(MINUTE_MS);
        let mut queues = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !queues.contains_key(queue) {
            if queues.len() >= MAX_QUEUES {
                return;
            }
            queues.insert(queue.to_string(), [(i64::MIN, 0); MINUTES]);
        }
        let Some(ring) = queues.get_mut(queue) else { return };
        let slot = &mut ring[minute.rem_euclid(MINUTES as i64) as usize];
        if slot.0 != minute {
            *slot = (minute, 0);
        }
        slot.1 = slot.1.saturating_add(1);
    }

    /// Dispatches from `queue` in each of the last [`MINUTES`] minutes, oldest first, the
    /// current (partial) minute last.
    pub fn per_minute(&self, queue: &str, now: Millis) -> Vec<u32> {
        let minute = now.div_euclid(MINUTE_MS);
        let queues = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ring = queues.get(queue);
        (0..MINUTES as i64)
            .rev()
            .map(|ago| {
                let m = minute - ago;
                ring.map(|r| r[m.rem_euclid(MINUTES as i64) as usize])
                    .filter(|slot| slot.0 == m)
                    .map_or(0, |slot| slot.1)
            })
            .collect()
    }

    /// A queue deleted: forget it.
    pub fn forget(&self, queue: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Millis = 1_700_000_000_000 / MINUTE_MS * MINUTE_MS;

    #[test]
    fn minutes_are_counted_and_age_out_of_the_window() {
        let r = DispatchRate::default();
        assert_eq!(r.per_minute("q", T), vec![0; MINUTES]);
        r.count("q", T);
        r.count("q", T + 59_999);
        r.count("q", T + 60_000);
        r.count("other", T);
        let now = r.per_minute("q", T + 60_000);
        assert_eq!(now.len(), MINUTES);
        assert_eq!(&now[MINUTES - 2..], [2, 1]);
        assert_eq!(now.iter().sum::<u32>(), 3);
        // Fourteen minutes on, the first minute is the window's oldest; a minute later, gone.
        let later = r.per_minute("q", T + 14 * 60_000);
        assert_eq!((later[0], later[1], later.iter().sum::<u32>()), (2, 1, 3));
        assert_eq!(r.per_minute("q", T + 15 * 60_000).iter().sum::<u32>(), 1);
        // A bucket reused for a new minute starts from zero, not from the old count.
        r.count("q", T + 15 * 60_000);
        assert_eq!(*r.per_minute("q", T + 15 * 60_000).last().unwrap(), 1);
        r.forget("q");
        assert_eq!(r.per_minute("q", T + 15 * 60_000), vec![0; MINUTES]);
    }

    #[test]
    fn queues_past_the_bound_go_uncounted() {
        let r = DispatchRate::default();
        for i in 0..MAX_QUEUES + 50 {
            r.count(&format!("q{i}"), T);
        }
        assert_eq!(r.0.lock().unwrap().len(), MAX_QUEUES);
        assert_eq!(r.per_minute(&format!("q{}", MAX_QUEUES + 10), T), vec![0; MINUTES]);
        // One already followed still counts.
        r.count("q0", T);
        assert_eq!(*r.per_minute("q0", T).last().unwrap(), 2);
    }
}
