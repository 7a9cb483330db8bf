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

use super::{lifecycle::Lifecycle, Engine};

/// Most workflows one transaction deletes.
pub const BATCH: u32 = 100;

/// How long the collector waits after a turn that found nothing more to delete.
const IDLE: Duration = Duration::from_millis(100);

/// The longest pause after a turn. A turn that waited behind a long transaction (SQLite's one
/// writer held by a bulk load) did little work; it should not put the collector to sleep for
/// three times that wait.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// The most of the wall clock the collector spends inside its transactions. A turn that took
/// `t` is followed by a pause of at least `t * (1 - DUTY) / DUTY`, up to [`MAX_PAUSE`]. A busy
/// database makes every transaction slower, the collector's too, so this is also how it yields
/// to load: the same batch that takes 20 ms on an idle database and 200 ms beside a full
/// workload is followed by 60 ms or 600 ms of nothing.
const DUTY: f64 = 0.25;

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
        d => Some(crate::duration::parse_duration(d)?),
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

/// The collector: one batch a turn, paced by [`Pace`], until the server stops.
pub async fn run(engine: Arc<Engine>) {
    let policy = engine.core.config.retention.clone();
    if !policy.is_on() {
        return;
    }
    let pace = Pace::new(policy.rate);
    let mut shutdown = engine.shutdown_signal();
    // What was deleted since the last log line: one line a second at most, not one a turn.
    let (mut logged, mut unlogged) = (tokio::time::Instant::now(), 0usize);
    loop {
        let mut pause = IDLE;
        if engine.store_health.is_reachable() {
            let started = tokio::time::Instant::now();
            let collected = engine.lifecycle.collect_once(&policy, pace.batch()).await;
            pause = pace.pause(collected, started.elapsed());
            if collected > 0 {
                engine.core.counters.deleted("retention", collected);
                unlogged += collected;
            }
        }
        if unlogged > 0 && logged.elapsed() >= Duration::from_secs(1) {
            tracing::info!(
                collected = unlogged,
                "retention deleted finished workflows past their time"
            );
            (logged, unlogged) = (tokio::time::Instant::now(), 0);
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

/// How fast the collector goes: never over its rate, no more than [`DUTY`] of the time in its
/// transactions (unless a turn takes so long that [`MAX_PAUSE`] cuts its pause short), and
/// slowly when there is nothing to delete. Pure, so its decisions are tested without a clock or
/// a database.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// Most workflows a second (`--retention-rate`).
    rate: u32,
}

impl Pace {
    fn new(rate: u32) -> Self {
        Pace { rate: rate.max(1) }
    }

    /// One turn's batch: a tenth of a second's rate, so turns are short and frequent, within
    /// 1..=[`BATCH`].
    fn batch(&self) -> usize {
        (self.rate / 10).clamp(1, BATCH) as usize
    }

    /// The wait after a turn that deleted `deleted` in `took`.
    fn pause(&self, deleted: usize, took: Duration) -> Duration {
        if deleted < self.batch() {
            // Caught up (or another replica's turn): look again in a while.
            return IDLE;
        }
        let by_rate = Duration::from_secs_f64(deleted as f64 / self.rate as f64).saturating_sub(took);
        let by_duty = took.mul_f64((1.0 - DUTY) / DUTY);
        // The cap is on the duty's pause only: the rate's (a second at most) always holds.
        by_rate.max(by_duty.min(MAX_PAUSE))
    }
}

impl Lifecycle {
    /// One turn of the collector: at most `budget` deleted. Returns how many.
    pub(crate) async fn collect_once(&self, policy: &Retention, budget: usize) -> usize {
        let mut budget = budget;
        let mut collected = 0;
        for pass in policy.passes(self.core.namespace(), self.core.now()) {
            while budget > 0 {
                let limit = budget.min(BATCH as usize) as u32;
                let batch = Collect {
                    covered: pass.covered.clone(),
                    except: pass.except.clone(),
                    finished_before: pass.finished_before,
                    limit,
                };
                match self.core.store.collect_finished(&batch).await {
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

    /// Over `secs` of full batches that each take `took`: how many were deleted, the time spent
    /// in transactions and the time that passed.
    fn simulate(pace: Pace, took: Duration, secs: u64) -> (usize, Duration, Duration) {
        let (mut deleted, mut clock, mut busy) = (0, Duration::ZERO, Duration::ZERO);
        while clock < Duration::from_secs(secs) {
            let n = pace.batch();
            deleted += n;
            busy += took;
            clock += took + pace.pause(n, took);
        }
        (deleted, busy, clock)
    }

    #[test]
    fn the_rate_holds_when_turns_are_quick() {
        for rate in [1, 7, 10, 99, 1000, 1001, 100_000] {
            let pace = Pace::new(rate);
            assert!((1..=BATCH as usize).contains(&pace.batch()), "{rate}");
            let (deleted, _, _) = simulate(pace, Duration::ZERO, 10);
            let expected = rate as usize * 10;
            assert!(
                deleted.abs_diff(expected) <= pace.batch(),
                "{rate}/s for 10 s: {deleted}"
            );
        }
        assert_eq!(Pace::new(0).batch(), 1, "a rate of 0 is read as 1");
    }

    #[test]
    fn slow_turns_are_followed_by_longer_pauses() {
        let pace = Pace::new(1000);
        // On an idle database a batch is quick and the rate decides.
        assert_eq!(pace.pause(100, Duration::from_millis(20)), Duration::from_millis(80));
        // Beside a workload the same batch is slow, and the collector stays out of the way.
        for took in [50, 200, 600] {
            let took = Duration::from_millis(took);
            let (deleted, busy, elapsed) = simulate(pace, took, 60);
            let share = busy.as_secs_f64() / elapsed.as_secs_f64();
            assert!(share <= DUTY + 1e-9, "{took:?}: in transactions {share:.3} of the time");
            assert!(deleted as f64 / elapsed.as_secs_f64() < 1000.0, "{took:?}");
        }
        assert_eq!(pace.pause(100, Duration::from_millis(200)), Duration::from_millis(600));
        // A turn that waited long behind another transaction pauses at most MAX_PAUSE.
        assert_eq!(pace.pause(100, Duration::from_secs(10)), MAX_PAUSE);
        assert_eq!(Pace::new(1).pause(1, Duration::from_secs(10)), MAX_PAUSE);
    }

    #[test]
    fn a_short_turn_means_caught_up() {
        let pace = Pace::new(1000);
        assert_eq!(pace.pause(0, Duration::from_millis(1)), IDLE);
        assert_eq!(pace.pause(99, Duration::from_millis(1)), IDLE);
        assert_eq!(
            Pace::new(7).pause(1, Duration::ZERO),
            Duration::from_secs_f64(1.0 / 7.0)
        );
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
