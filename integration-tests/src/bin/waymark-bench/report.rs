//! The figures of one backend's run: a table for people and a one-line summary for scripts.

use super::{parked, polyglot, queued, raw, unary, variant::Variant};

pub struct Report {
    pub backend: &'static str,
    /// The file system the database lives on (see `machine.rs`).
    pub filesystem: String,
    pub workflows: usize,
    pub steps: u32,
    pub starts_s: f64,
    pub wall_s: f64,
    pub steps_per_s: f64,
    pub workflows_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub latency_runs: usize,
    pub raw: raw::Baseline,
    pub wakeup_runs: usize,
    pub wakeup_p50_ms: f64,
    pub wakeup_p99_ms: f64,
    pub wakeup_mean_ms: f64,
    /// Send until the workflow is done and `await_workflow` has returned.
    pub wakeup_done_p50_ms: f64,
    /// The server's resident memory after the throughput, latency and wakeup workloads.
    pub rss_loaded_mb: f64,
    pub idle_waiters: usize,
    pub idle_window_s: f64,
    /// None on SQLite (no transaction counter).
    pub idle_db_tx_per_s: Option<f64>,
    /// Raw counter delta and the bench's own transactions subtracted from it.
    pub idle_db_tx_raw: Option<(i64, i64)>,
    pub parked: Option<parked::Parked>,
    pub queued: Option<queued::Queued>,
    pub unary: Option<unary::Unary>,
    pub polyglot: Vec<polyglot::Polyglot>,
    /// The throughput and latency workloads again with TLS and API keys on.
    /// Workloads 1 and 2 on servers set up other ways (TLS and keys; traces and metrics).
    pub variants: Vec<Variant>,
}

/// "met", or by how much a figure falls short of a floor.
fn at_least(value: f64, floor: f64, what: &str) -> String {
    if value >= floor {
        format!("target {what}: met")
    } else {
        format!("target {what}: NOT met, {:.0} % short", 100.0 * (1.0 - value / floor))
    }
}

/// "met", or by how much a figure is over a ceiling.
fn at_most(value: f64, ceiling: f64, what: &str) -> String {
    if value <= ceiling {
        format!("target {what}: met")
    } else {
        format!("target {what}: NOT met, {:.0} % over", 100.0 * (value / ceiling - 1.0))
    }
}

impl Report {
    pub fn ratio(&self) -> f64 {
        self.steps_per_s / self.raw.per_s()
    }

    pub fn print_table(&self) {
        let pg = self.backend == "postgres";
        let target = |met: bool, what: &str| format!("target {what}: {}", if met { "met" } else { "NOT met" });
        let row = |metric: &str, value: String, note: &str| println!("{metric:<36} {value:>14}  {note}");
        println!();
        println!("== {} ==", self.backend);
        println!("database on {}", self.filesystem);
        row("metric", "value".into(), "note");
        println!("{}", "-".repeat(36 + 1 + 14 + 2 + 30));
        row(
            "throughput: workflows x steps",
            format!("{} x {}", self.workflows, self.steps),
            "",
        );
        row("  all starts acknowledged (s)", format!("{:.3}", self.starts_s), "");
        row("  wall, first start -> all done (s)", format!("{:.3}", self.wall_s), "");
        row("  steps/s", format!("{:.1}", self.steps_per_s), "");
        row("  workflows/s", format!("{:.1}", self.workflows_per_s), "");
        row(
            "  SUCCESS, output checked",
            format!("{}/{}", self.workflows, self.workflows),
            "read back; any other outcome fails the run",
        );
        row("latency: sequential 1-step runs", self.latency_runs.to_string(), "");
        row(
            "  p50 start -> result (ms)",
            format!("{:.2}", self.p50_ms),
            &if pg {
                at_most(self.p50_ms, 1.5, "<= 1.5 ms (PG)")
            } else {
                "target <= 1.5 ms is defined for PG".to_string()
            },
        );
        row(
            "  p99 start -> result (ms)",
            format!("{:.2}", self.p99_ms),
            &if pg {
                at_most(self.p99_ms, 3.0, "<= 3 ms (PG)")
            } else {
                String::new()
            },
        );
        row("  mean (ms)", format!("{:.2}", self.mean_ms), "");
        let raw = &self.raw;
        row(
            "raw baseline: rows x connections",
            format!("{} x {}", raw.rows, raw.conns),
            &if raw.rows >= raw::REFERENCE_ROWS {
                "one row per commit, a fresh database each run".to_string()
            } else {
                format!("fewer than {} rows a run: not a reference figure", raw::REFERENCE_ROWS)
            },
        );
        let runs = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ");
        row(
            "  inserts/s before, median",
            format!("{:.1}", raw::median(raw.before.clone())),
            &format!("runs: {}", runs(&raw.before)),
        );
        row(
            "  inserts/s after, median",
            format!("{:.1}", raw::median(raw.after.clone())),
            &format!("runs: {}", runs(&raw.after)),
        );
        row(
            "  raw inserts/s, median of all",
            format!("{:.1}", raw.per_s()),
            &format!(
                "of the {} runs; the ratio divides by it",
                raw.before.len() + raw.after.len()
            ),
        );
        let ratio_note = match (self.workflows == 1000 && self.steps == 10, pg) {
            (true, true) => at_least(self.ratio(), 1.0, ">= 1.0 (PG, W=1000 K=10)"),
            (true, false) => at_least(self.ratio(), 2.0, ">= 2.0 (SQLite, W=1000 K=10)"),
            (false, _) => "the targets are defined for W=1000 K=10".to_string(),
        };
        row(
            "ratio steps/s / raw inserts/s",
            format!("{:.3}", self.ratio()),
            &ratio_note,
        );
        row("wakeup: sequential send -> recv", self.wakeup_runs.to_string(), "");
        let wake_note = at_most(self.wakeup_p50_ms, 1.0, "<= 1 ms");
        row(
            "  p50 send -> recv returns (ms)",
            format!("{:.2}", self.wakeup_p50_ms),
            &wake_note,
        );
        row(
            "  p99 send -> recv returns (ms)",
            format!("{:.2}", self.wakeup_p99_ms),
            "",
        );
        row("  mean (ms)", format!("{:.2}", self.wakeup_mean_ms), "");
        row(
            "  p50 send -> awaited done (ms)",
            format!("{:.2}", self.wakeup_done_p50_ms),
            "incl. completion and AwaitWorkflow",
        );
        row(
            "memory after load: server RSS (MiB)",
            format!("{:.1}", self.rss_loaded_mb),
            "after the throughput, latency and wakeup workloads",
        );
        row(
            "idle: waiters blocked in recv",
            self.idle_waiters.to_string(),
            &format!("window {:.1} s", self.idle_window_s),
        );
        match (self.idle_db_tx_per_s, self.idle_db_tx_raw) {
            (Some(tps), Some((raw, own))) => {
                row(
                    "  db transactions/s",
                    format!("{tps:.2}"),
                    &target(tps <= 10.0, "<= 10"),
                );
                row(
                    "  counter delta - own reads",
                    format!("{raw} - {own}"),
                    "pg_stat_database xact_commit+xact_rollback",
                );
            }
            _ => row("  db transactions/s", "n/a".into(), "SQLite has no transaction counter"),
        }
        if let Some(p) = &self.parked {
            row(
                "memory: parked workflows",
                p.workflows.to_string(),
                &format!("all parked after {:.1} s", p.seconds),
            );
            row("  server RSS before (MiB)", format!("{:.1}", p.rss_before_mb), "");
            row(
                "  server RSS, all parked (MiB)",
                format!("{:.1}", p.rss_parked_mb),
                &if p.workflows >= 100_000 {
                    target(p.rss_parked_mb <= 500.0, "<= 500 MB at 100k")
                } else {
                    "target <= 500 MB is defined for 100k".to_string()
                },
            );
        }
        if let Some(u) = &self.unary {
            for r in &u.rates {
                row(
                    &format!(
                        "unary: {}/s, {} caller{}",
                        r.rpc,
                        r.callers,
                        if r.callers == 1 { "" } else { "s" }
                    ),
                    format!("{:.0}", r.per_s),
                    &format!("{} calls, p50 {:.2} ms, p99 {:.2} ms", r.calls, r.p50_ms, r.p99_ms),
                );
                if r.rpc == "StartWorkflow" {
                    let ratio = r.per_s / raw.per_s();
                    let note = match (r.callers, pg) {
                        (50, true) => at_least(ratio, 1.0, ">= 1.0x raw (PG)"),
                        (50, false) => at_least(ratio, 3.0, ">= 3x raw (SQLite)"),
                        _ => "every start read back: once, ENQUEUED, its input".to_string(),
                    };
                    row("  ratio to raw inserts/s", format!("{ratio:.2}"), &note);
                }
            }
        }
        for p in &self.polyglot {
            let ratio = p.steps_per_s / self.steps_per_s;
            row(
                &format!("{} worker: steps/s", p.language),
                format!("{:.1}", p.steps_per_s),
                &format!("{} x {}, all SUCCESS, output checked", self.workflows, self.steps),
            );
            let note = match p.language {
                "python" => at_least(ratio, 0.5, ">= 0.5x Rust"),
                "typescript" => at_least(ratio, 0.8, ">= 0.8x Rust"),
                _ => "no target".to_string(),
            };
            row(
                &format!("  ratio to Rust ({})", p.language),
                format!("{ratio:.2}"),
                &note,
            );
        }
        for s in &self.variants {
            row(
                &format!("{}: steps/s", s.label),
                format!("{:.1}", s.steps_per_s),
                &format!("same workload, second server {}", s.note),
            );
            row(
                "  ratio to plaintext",
                format!("{:.2}", s.steps_per_s / self.steps_per_s),
                "",
            );
            row("  latency p50 (ms)", format!("{:.2}", s.p50_ms), "");
            row("  latency p99 (ms)", format!("{:.2}", s.p99_ms), "");
            row("  p50 ratio to plaintext", format!("{:.2}", s.p50_ms / self.p50_ms), "");
            if let Some(f) = &s.flood {
                let ratio = f.flooded_p50_ms / f.idle_p50_ms;
                row(
                    &format!("  p50 (ms), {} clients of made-up keys", f.clients),
                    format!("{:.2}", f.flooded_p50_ms),
                    &format!("idle just before {:.2}; {} refused meanwhile", f.idle_p50_ms, f.refused),
                );
                row("  p99 (ms) under that flood", format!("{:.2}", f.flooded_p99_ms), "");
                row(
                    "  flooded p50 ratio to idle",
                    format!("{ratio:.2}"),
                    &target(ratio <= 2.0, "<= 2x"),
                );
            }
        }
        if let Some(q) = &self.queued {
            row("queues with limits: workflows", q.limited_workflows.to_string(), "");
            row(
                "  dispatched/s",
                format!("{:.0}", q.limited_dispatch_per_s),
                &if pg {
                    target(q.limited_dispatch_per_s >= 5000.0, ">= 5000/s (PG)")
                } else {
                    String::new()
                },
            );
            row("  dispatch/s, 1,000 waiting", format!("{:.0}", q.shallow_per_s), "");
            row(
                &format!("  dispatch/s, {} waiting", q.deep),
                format!("{:.0}", q.deep_per_s),
                "",
            );
            let spread = q.depth_ratio().max(1.0 / q.depth_ratio());
            row(
                "  spread (larger / smaller)",
                format!("{spread:.2}"),
                &at_most(spread, 1.2, "within 1.2x"),
            );
        }
    }

    pub fn summary(&self) -> String {
        let slashed = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join("/");
        format!(
            "backend={} fs={} steps_per_s={:.1} workflows_per_s={:.1} p50_ms={:.2} p99_ms={:.2} raw_inserts_per_s={:.1} raw_before={} raw_after={} ratio={:.3} \
             wakeup_p50_ms={:.2} wakeup_p99_ms={:.2} rss_loaded_mb={:.1} idle_db_tx_per_s={} parked_rss_mb={} \
             limited_dispatch_per_s={} backlog_shallow_per_s={} backlog_deep_per_s={} start_c50_per_s={}{}",
            self.backend,
            self.filesystem.split_whitespace().next().unwrap_or("unknown"),
            self.steps_per_s,
            self.workflows_per_s,
            self.p50_ms,
            self.p99_ms,
            self.raw.per_s(),
            slashed(&self.raw.before),
            slashed(&self.raw.after),
            self.ratio(),
            self.wakeup_p50_ms,
            self.wakeup_p99_ms,
            self.rss_loaded_mb,
            self.idle_db_tx_per_s
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "n/a".into()),
            self.parked
                .as_ref()
                .map(|p| format!("{:.1}", p.rss_parked_mb))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.limited_dispatch_per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.shallow_per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.deep_per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.unary
                .as_ref()
                .and_then(|u| u.rate("StartWorkflow", 50))
                .map(|r| format!("{:.0}", r.per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.variants
                .iter()
                .map(|v| format!(
                    " {k}_steps_per_s={:.1} {k}_p50_ms={:.2}{}",
                    v.steps_per_s,
                    v.p50_ms,
                    v.flood
                        .as_ref()
                        .map(|f| format!(" flooded_p50_ratio={:.2}", f.flooded_p50_ms / f.idle_p50_ms))
                        .unwrap_or_default(),
                    k = v.key
                ))
                .collect::<String>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_target_says_by_how_much() {
        assert_eq!(at_least(1.2, 1.0, ">= 1.0"), "target >= 1.0: met");
        assert_eq!(at_least(0.41, 1.0, ">= 1.0"), "target >= 1.0: NOT met, 59 % short");
        assert_eq!(at_most(1.5, 1.5, "<= 1.5 ms"), "target <= 1.5 ms: met");
        assert_eq!(at_most(2.1, 1.5, "<= 1.5 ms"), "target <= 1.5 ms: NOT met, 40 % over");
    }
}
