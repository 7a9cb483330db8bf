//! Retention: finished workflows are deleted, with everything recorded for them, once they are
//! older than the policy keeps them — so a database under steady load stops growing.
//!
//! The policy is the server's `--retention` (every finished workflow) and its
//! `--retention-rule`s, each covering a namespace, a queue and/or a status and keeping what it
//! covers for its own time (or for ever). The first rule that covers a workflow decides; the
//! default takes the rest. A collector on each replica deletes at most `--retention-rate`
//! workflows a second, spread over ten turns a second in batches of at most [`BATCH`], each one
//! short transaction, so it never holds a lock (SQLite's one writer above all) for long or
//! stalls dispatch; replicas sharing a database take turns (a replica that finds another
//! collecting skips its turn).

use std::{sync::Arc, time::Duration};

use waymark_store::{Collect, Covered, Millis, WorkflowStatus};

use super::Engine;

/// Most workflows one transaction deletes.
pub const BATCH: u32 = 100;

/// How often the collector takes a turn: its rate is spread over the second, not spent at once.
const TICK: Duration = Duration::from_millis(100);
const TICKS_PER_SECOND: u32 = 10;

/// One rule: what it covers and how long it keeps it (`None`: for ever).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionRule {
    /// Only in this namespace (`None`: in every one).
    pub namespace: Option<String>,
    pub covered: Covered,
    pub keep: Option<Duration>,
}

/// The whole policy. Off (nothing deleted) unless something has a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    pub rules: Vec<RetentionRule>,
    /// For finished workflows no rule covers (`None`: kept for ever).
    pub default_keep: Option<Duration>,
    /// Most workflows deleted per second on one replica.
    pub rate: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            rules: Vec::new(),
            default_keep: None,
            rate: 1_000,
        }
    }
}

/// One pass's ask of the store: what it covers, what earlier rules own, and its cutoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub covered: Covered,
    pub except: Vec<Covered>,
    pub finished_before: Millis,
}

impl Retention {
    pub fn is_on(&self) -> bool {
        self.default_keep.is_some() || self.rules.iter().any(|r| r.keep.is_some())
    }

    /// What to collect in `namespace` at `now`: each rule with a time, then the default, each
    /// excepting what the rules before it cover (a rule that keeps for ever only excepts).
    pub fn passes(&self, namespace: &str, now: Millis) -> Vec<Pass> {
        let rules: Vec<&RetentionRule> = self
            .rules
            .iter()
            .filter(|r| r.namespace.as_deref().is_none_or(|n| n == namespace))
            .collect();
        let cutoff = |keep: Duration| now.saturating_sub(keep.as_millis().min(i64::MAX as u128) as i64);
        let mut passes = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            if let Some(keep) = r.keep {
                passes.push(Pass {
                    covered: r.covered.clone(),
                    except: rules[..i].iter().map(|e| e.covered.clone()).collect(),
                    finished_before: cutoff(keep),
                });
            }
        }
        if let Some(keep) = self.default_keep {
            passes.push(Pass {
                covered: Covered::default(),
                except: rules.iter().map(|e| e.covered.clone()).collect(),
                finished_before: cutoff(keep),
            });
        }
        passes
    }
}

/// Reads a rule: `SELECTOR[,SELECTOR…]=DURATION|forever`, each selector `namespace:NAME`,
/// `queue:NAME` or `status:STATUS` (a finished status), e.g. `queue:payments,status:ERROR=90d`.
/// Selectors of one kind add up (`queue:a,queue:b`); of different kinds, all must hold.
pub fn parse_rule(text: &str) -> Result<RetentionRule, String> {
    let (selectors, keep) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?}: expected SELECTORS=DURATION, e.g. queue:payments=30d"))?;
    let keep = match keep.trim() {
        "forever" => None,
        d => Some(crate::server::parse_duration(d)?),
    };
    let mut rule = RetentionRule {
        namespace: None,
        covered: Covered::default(),
        keep,
    };
    for selector in selectors.split(',').map(str::trim) {
        match selector.split_once(':') {
            Some(("namespace", n)) if !n.is_empty() && rule.namespace.is_none() => rule.namespace = Some(n.into()),
            Some(("queue", q)) if !q.is_empty() => rule.covered.queues.push(q.into()),
            Some(("status", s)) => match WorkflowStatus::parse(&s.to_ascii_uppercase()) {
                Some(st) if st.is_terminal() => rule.covered.statuses.push(st),
                _ => {
                    return Err(format!(
                        "{s:?} is not a finished status (SUCCESS, ERROR, CANCELLED, MAX_RECOVERY_ATTEMPTS_EXCEEDED)"
                    ))
                }
            },
            _ => {
                return Err(format!(
                    "{selector:?}: expected namespace:NAME, queue:NAME or status:STATUS"
                ))
            }
        }
    }
    Ok(rule)
}

/// The collector: once a tick, up to the rate, pass by pass, batch by batch.
pub async fn run(engine: Arc<Engine>) {
    let policy = engine.config.retention.clone();
    if !policy.is_on() {
        return;
    }
    let mut shutdown = engine.shutdown_signal();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What was deleted this second: one log line a second, not one a turn.
    let (mut turns, mut this_second) = (0u32, 0usize);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
        let budget = turn_budget(policy.rate, turns % TICKS_PER_SECOND);
        turns += 1;
        if engine.store_health.is_reachable() && budget > 0 {
            let collected = engine.collect_once(&policy, budget).await;
            if collected > 0 {
                engine.count_deleted("retention", collected);
                this_second += collected;
            }
        }
        if turns.is_multiple_of(TICKS_PER_SECOND) && this_second > 0 {
            tracing::info!(
                collected = this_second,
                "retention deleted finished workflows past their time"
            );
            this_second = 0;
        }
    }
}

/// Turn `turn` (0-9) of a second's share of `rate`: the ten add up to `rate` exactly, so a rate
/// below ten a second still holds (7 a second: turns of 0 and 1).
fn turn_budget(rate: u32, turn: u32) -> usize {
    let (rate, turn, n) = (rate as u64, turn as u64, TICKS_PER_SECOND as u64);
    (rate * (turn + 1) / n - rate * turn / n) as usize
}

impl Engine {
    /// One turn of the collector: at most `budget` deleted. Returns how many.
    pub(crate) async fn collect_once(&self, policy: &Retention, budget: usize) -> usize {
        let mut budget = budget;
        let mut collected = 0;
        for pass in policy.passes(self.namespace(), self.now()) {
            while budget > 0 {
                let limit = budget.min(BATCH as usize) as u32;
                let batch = Collect {
                    covered: pass.covered.clone(),
                    except: pass.except.clone(),
                    finished_before: pass.finished_before,
                    limit,
                };
                match self.store.collect_finished(&batch).await {
                    Ok(Some(ids)) => {
                        budget -= ids.len().min(budget);
                        collected += ids.len();
                        if ids.len() < limit as usize {
                            break;
                        }
                    }
                    // Another replica is collecting this database: its turn.
                    Ok(None) => return collected,
                    Err(e) => {
                        tracing::warn!(error = %e, "retention batch failed; trying again next tick");
                        return collected;
                    }
                }
            }
        }
        collected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seconds_turns_add_up_to_the_rate() {
        for rate in [0, 1, 7, 10, 99, 1000, 1001] {
            let turns: Vec<usize> = (0..TICKS_PER_SECOND).map(|t| turn_budget(rate, t)).collect();
            assert_eq!(turns.iter().sum::<usize>(), rate as usize, "{rate}: {turns:?}");
            assert!(
                turns.iter().all(|&b| b <= (rate as usize).div_ceil(10)),
                "{rate}: {turns:?}"
            );
        }
    }

    fn rule(text: &str) -> RetentionRule {
        parse_rule(text).unwrap()
    }

    #[test]
    fn rules_read_their_selectors_and_times() {
        let r = rule("queue:payments,status:error=90d");
        assert_eq!(r.covered.queues, ["payments"]);
        assert_eq!(r.covered.statuses, [WorkflowStatus::Error]);
        assert_eq!(r.keep, Some(Duration::from_secs(90 * 86_400)));
        let r = rule("namespace:team-a,queue:a,queue:b=forever");
        assert_eq!(
            (r.namespace.as_deref(), r.covered.queues.len(), r.keep),
            (Some("team-a"), 2, None)
        );
        for bad in [
            "queue:x",
            "status:PENDING=1d",
            "queue:=1d",
            "color:red=1d",
            "queue:x=soon",
        ] {
            assert!(parse_rule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn earlier_rules_own_what_they_cover_and_the_default_takes_the_rest() {
        let policy = Retention {
            rules: vec![
                rule("status:ERROR=forever"),
                rule("queue:payments=7d"),
                rule("namespace:other,queue:x=1d"),
            ],
            default_keep: Some(Duration::from_secs(86_400)),
            rate: 10,
        };
        let now = 10 * 86_400_000;
        let passes = policy.passes("default", now);
        assert_eq!(
            passes.len(),
            2,
            "errors kept for ever; another namespace's rule left out"
        );
        assert_eq!(passes[0].covered.queues, ["payments"]);
        assert_eq!(passes[0].except, [rule("status:ERROR=1d").covered]);
        assert_eq!(passes[0].finished_before, 3 * 86_400_000);
        assert_eq!(passes[1].covered, Covered::default());
        assert_eq!(passes[1].except.len(), 2);
        assert_eq!(passes[1].finished_before, 9 * 86_400_000);
        assert!(!Retention::default().is_on());
        assert_eq!(policy.passes("other", now).len(), 3);
    }
}
