//! What a limited queue admits in one claim: the store counts what is running and what started
//! lately under the queue's lock and reads the heads of its backlog; these functions decide, with
//! no database, which of those candidates go out. The store only counts, reads and applies.

use std::collections::HashMap;

/// At most `max_starts` workflows started from the queue in any window of `period_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub max_starts: u32,
    /// Milliseconds.
    pub period_ms: i64,
}

/// What a queue lets run at once. A limit that is `None` does not apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueLimits {
    /// Per worker process.
    pub worker_concurrency: Option<u32>,
    /// Across the fleet.
    pub global_concurrency: Option<u32>,
    pub rate_limit: Option<RateLimit>,
    /// Per partition key, across the fleet.
    pub partition_concurrency: Option<u32>,
}

impl QueueLimits {
    /// Whether any limit applies (the queue is then claimed one queue at a time, under its lock).
    pub fn any(&self) -> bool {
        self.worker_concurrency.is_some()
            || self.global_concurrency.is_some()
            || self.rate_limit.is_some()
            || self.partition_concurrency.is_some()
    }
}

/// What the queue holds right now, counted under its lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Load {
    /// PENDING workflows of the queue, fleet-wide.
    pub running: u64,
    /// PENDING workflows of the queue on the claiming worker.
    pub running_here: u64,
    /// Workflows of the queue first dispatched within the rate limit's window.
    pub started_in_window: u64,
    /// PENDING workflows per partition key (only read when partitions are limited).
    pub running_by_partition: HashMap<String, u64>,
}

/// A workflow at the head of the backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub workflow_id: String,
    pub partition_key: String,
    /// Dispatched before (a recovered or woken workflow): not a new start, so the rate limit
    /// does not count it.
    pub started: bool,
}

static TURN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A counter that moves on every call: which partition a claim starts with (see [`admit`]).
pub fn next_turn() -> usize {
    TURN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn left(limit: Option<u32>, used: u64) -> u64 {
    limit.map_or(u64::MAX, |l| (l as u64).saturating_sub(used))
}

/// How many workflows this claim may take at most, before partitions and the rate limit.
pub fn room(limits: &QueueLimits, load: &Load, wanted: u32) -> u32 {
    let room = (wanted as u64)
        .min(left(limits.global_concurrency, load.running))
        .min(left(limits.worker_concurrency, load.running_here));
    room as u32
}

/// How many more of partition `key` may run.
pub fn partition_room(limits: &QueueLimits, load: &Load, key: &str) -> u32 {
    let running = load.running_by_partition.get(key).copied().unwrap_or(0);
    left(limits.partition_concurrency, running).min(u32::MAX as u64) as u32
}

/// Splits (workflow id, partition key, started before) rows, each partition's in dispatch
/// order, into one list per partition, in the order the partitions first appear.
pub fn group(rows: Vec<(String, String, bool)>) -> Vec<Vec<Candidate>> {
    let mut groups: Vec<Vec<Candidate>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (workflow_id, partition_key, started) in rows {
        let i = *index.entry(partition_key.clone()).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(Candidate {
            workflow_id,
            partition_key,
            started,
        });
    }
    groups
}

/// Picks up to `room` candidates. `groups` holds one list per partition, each already in
/// dispatch order and no longer than that partition's room. Partitions are taken in turn —
/// the first of each, then the second of each — starting at partition `turn` (modulo their
/// number; claimers pass a counter that moves on every claim), so neither a deep backlog nor
/// an early key can starve another partition even when only one slot is free at a time. A
/// new start is skipped once the rate limit's window is full; re-dispatches still go.
pub fn admit(
    limits: &QueueLimits,
    load: &Load,
    mut groups: Vec<Vec<Candidate>>,
    room: u32,
    turn: usize,
) -> Vec<String> {
    if !groups.is_empty() {
        let n = groups.len();
        groups.rotate_left(turn % n);
    }
    let mut starts_left = limits.rate_limit.map_or(u64::MAX, |r| {
        (r.max_starts as u64).saturating_sub(load.started_in_window)
    });
    let mut queues: Vec<std::vec::IntoIter<Candidate>> = groups.into_iter().map(|g| g.into_iter()).collect();
    let mut chosen = Vec::new();
    while (chosen.len() as u32) < room && !queues.is_empty() {
        queues.retain_mut(|q| {
            if (chosen.len() as u32) >= room {
                return true;
            }
            match q.next() {
                Some(c) => {
                    if !c.started {
                        if starts_left == 0 {
                            return true;
                        }
                        starts_left -= 1;
                    }
                    chosen.push(c.workflow_id);
                    true
                }
                None => false,
            }
        });
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, key: &str, started: bool) -> Candidate {
        Candidate {
            workflow_id: id.into(),
            partition_key: key.into(),
            started,
        }
    }

    #[test]
    fn room_is_the_tightest_of_the_concurrency_limits() {
        let limits = QueueLimits {
            worker_concurrency: Some(2),
            global_concurrency: Some(5),
            ..Default::default()
        };
        let load = |running, here| Load {
            running,
            running_here: here,
            ..Default::default()
        };
        assert_eq!(room(&limits, &load(0, 0), 10), 2);
        assert_eq!(room(&limits, &load(4, 0), 10), 1);
        assert_eq!(room(&limits, &load(3, 2), 10), 0);
        assert_eq!(
            room(&limits, &load(7, 0), 10),
            0,
            "over the limit (it was lowered) admits nothing"
        );
        assert_eq!(room(&QueueLimits::default(), &load(1000, 1000), 10), 10);
    }

    #[test]
    fn partitions_are_taken_in_turn() {
        let groups = vec![
            vec![c("a1", "a", false), c("a2", "a", false), c("a3", "a", false)],
            vec![c("b1", "b", false)],
            vec![c("c1", "c", false), c("c2", "c", false)],
        ];
        let got = admit(&QueueLimits::default(), &Load::default(), groups.clone(), 5, 0);
        assert_eq!(got, ["a1", "b1", "c1", "a2", "c2"]);
        let got = admit(&QueueLimits::default(), &Load::default(), groups.clone(), 2, 0);
        assert_eq!(got, ["a1", "b1"]);
        // One slot at a time: successive turns go round the partitions.
        let firsts: Vec<String> = (0..4)
            .map(|turn| admit(&QueueLimits::default(), &Load::default(), groups.clone(), 1, turn).remove(0))
            .collect();
        assert_eq!(firsts, ["a1", "b1", "c1", "a1"]);
    }

    #[test]
    fn rows_group_by_partition_in_order_of_appearance() {
        let rows = vec![
            ("b1".to_string(), "b".to_string(), false),
            ("a1".to_string(), "a".to_string(), true),
            ("b2".to_string(), "b".to_string(), false),
        ];
        let groups = group(rows);
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups[0].iter().map(|c| c.workflow_id.as_str()).collect::<Vec<_>>(),
            ["b1", "b2"]
        );
        assert_eq!(groups[1], vec![c("a1", "a", true)]);
    }

    #[test]
    fn the_rate_limit_counts_new_starts_only() {
        let limits = QueueLimits {
            rate_limit: Some(RateLimit {
                max_starts: 3,
                period_ms: 1000,
            }),
            ..Default::default()
        };
        let load = Load {
            started_in_window: 2,
            ..Default::default()
        };
        let groups = vec![vec![c("new1", "", false), c("new2", "", false), c("old", "", true)]];
        assert_eq!(admit(&limits, &load, groups, 10, 0), ["new1", "old"]);
    }

    #[test]
    fn partition_room_counts_that_partition_only() {
        let limits = QueueLimits {
            partition_concurrency: Some(2),
            ..Default::default()
        };
        let load = Load {
            running_by_partition: [("a".to_string(), 2), ("b".to_string(), 1)].into(),
            ..Default::default()
        };
        assert_eq!(partition_room(&limits, &load, "a"), 0);
        assert_eq!(partition_room(&limits, &load, "b"), 1);
        assert_eq!(partition_room(&limits, &load, "c"), 2);
    }
}
