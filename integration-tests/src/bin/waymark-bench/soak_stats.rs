//! The soak's figures: one window per report line, the server's RSS sampled every second, and
//! the verdicts after the warm-up.

use std::time::Duration;

use crate::{verify::thousands, workloads::percentile};

/// `mm:ss`.
pub fn mmss(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}", s / 60, s % 60)
}

/// The workflows that finished between two report lines.
pub struct Window {
    pub start: Duration,
    pub end: Duration,
    pub finished: usize,
    /// Start->result, ms; NaN when none finished.
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Server RSS at the end of the window, MiB.
    pub rss: f64,
}

impl Window {
    pub fn new(start: Duration, end: Duration, latencies: &[f64], rss: f64) -> Window {
        let mut latencies = latencies.to_vec();
        latencies.sort_by(|a, b| a.total_cmp(b));
        Window {
            start,
            end,
            finished: latencies.len(),
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
            max: latencies.last().copied().unwrap_or(f64::NAN),
            rss,
        }
    }

    /// A window in which nothing finished has no tail to speak of, only a stall: infinite.
    fn p99_or_stall(&self) -> f64 {
        if self.finished == 0 {
            f64::INFINITY
        } else {
            self.p99
        }
    }

    pub fn header() -> String {
        format!(
            "[soak] {:>5}  {:>9} {:>6}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {:>5}",
            "time", "finished", "/s", "p50 ms", "p99 ms", "max ms", "RSS MiB", "in flight", "kills"
        )
    }

    pub fn line(&self, in_flight: usize, kills: usize) -> String {
        let secs = (self.end - self.start).as_secs_f64().max(1e-9);
        format!(
            "[soak] {:>5}  {:>9} {:>6.0}  {:>8.1}  {:>8.1}  {:>8.0}  {:>8.1}  {:>9}  {:>5}",
            mmss(self.end),
            thousands(self.finished),
            self.finished as f64 / secs,
            self.p50,
            self.p99,
            self.max,
            self.rss,
            in_flight,
            kills
        )
    }
}

/// RSS samples and windows, split at the end of the warm-up.
pub struct Samples {
    warmup: Duration,
    /// The first RSS read at or after the warm-up: what later samples are held to.
    rss_ref: Option<f64>,
    rss_min: f64,
    rss_max: f64,
    rss_samples: usize,
    /// Start->result of every workflow that finished in a window begun during the warm-up.
    warmup_latencies: Vec<f64>,
    pub windows: Vec<Window>,
}

/// RSS may move this much (either way) from its post-warm-up value.
const RSS_BAND: f64 = 0.10;

/// After the warm-up, each window's p99 may be at most this many times the p99 of every workflow
/// finished during the warm-up (which saw kills too) ...
const P99_FACTOR: f64 = 2.0;
/// ... or this much above it, whichever is more: a p99 of a few ms moves by tens of ms with one
/// scheduling hiccup on a small shared machine.
const P99_SLACK_MS: f64 = 50.0;

impl Samples {
    pub fn new(warmup: Duration) -> Samples {
        Samples {
            warmup,
            rss_ref: None,
            rss_min: f64::INFINITY,
            rss_max: 0.0,
            rss_samples: 0,
            warmup_latencies: Vec::new(),
            windows: Vec::new(),
        }
    }

    pub fn rss(&mut self, at: Duration, mb: f64) {
        if at < self.warmup {
            return;
        }
        self.rss_ref.get_or_insert(mb);
        self.rss_min = self.rss_min.min(mb);
        self.rss_max = self.rss_max.max(mb);
        self.rss_samples += 1;
    }

    pub fn window(&mut self, w: Window, latencies: Vec<f64>) {
        if w.start < self.warmup {
            self.warmup_latencies.extend(latencies);
        }
        self.windows.push(w);
    }

    fn after_warmup(&self) -> impl Iterator<Item = &Window> {
        self.windows.iter().filter(|w| w.start >= self.warmup)
    }

    /// (reference, min, max, samples, within the band), when anything was read after the warm-up.
    pub fn rss_verdict(&self) -> Option<(f64, f64, f64, usize, bool)> {
        let r = self.rss_ref?;
        let ok = self.rss_min >= r * (1.0 - RSS_BAND) && self.rss_max <= r * (1.0 + RSS_BAND);
        Some((r, self.rss_min, self.rss_max, self.rss_samples, ok))
    }

    /// (the warm-up's p99, bound, worst window after it, within the bound), when windows ran on
    /// both sides of the warm-up's end.
    pub fn p99_verdict(&self) -> Option<(f64, f64, &Window, bool)> {
        if self.warmup_latencies.is_empty() {
            return None;
        }
        let mut warm = self.warmup_latencies.clone();
        warm.sort_by(|a, b| a.total_cmp(b));
        let reference = percentile(&warm, 99.0);
        let bound = (reference * P99_FACTOR).max(reference + P99_SLACK_MS);
        let worst = self
            .after_warmup()
            .max_by(|a, b| a.p99_or_stall().total_cmp(&b.p99_or_stall()))?;
        Some((reference, bound, worst, worst.p99_or_stall() <= bound))
    }
}

/// The end-of-run summary.
pub struct Summary {
    pub duration: Duration,
    pub rate: f64,
    pub max_rate: f64,
    pub started: usize,
    pub succeeded: usize,
    pub kills: usize,
    pub kills_holding: usize,
    pub latencies: Vec<f64>,
    pub samples: Samples,
}

impl Summary {
    pub fn print(mut self) {
        self.latencies.sort_by(|a, b| a.total_cmp(b));
        let yes = |ok: bool| if ok { "yes" } else { "NO" };
        println!();
        println!("== soak summary ==");
        println!(
            "load: {:.1} workflows/s for {} (maximum measured: {:.1}/s); {} workers SIGKILLed and replaced, \
             {} of them holding workflows",
            self.rate,
            mmss(self.duration),
            self.max_rate,
            self.kills,
            self.kills_holding
        );
        println!(
            "workflows: {} started (maximum measurement included), {} SUCCESS with the right output in the store",
            thousands(self.started),
            thousands(self.succeeded)
        );
        println!(
            "start->result, all sustained-load workflows: p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms",
            percentile(&self.latencies, 50.0),
            percentile(&self.latencies, 99.0),
            self.latencies.last().copied().unwrap_or(f64::NAN)
        );
        let warm = mmss(self.samples.warmup);
        match self.samples.rss_verdict() {
            Some((r, min, max, n, ok)) => println!(
                "server RSS after the {warm} warm-up: {r:.1} MiB at {warm}, then {min:.1}-{max:.1} MiB over {n} samples \
                 (one a second); within ±{:.0} %: {}",
                RSS_BAND * 100.0,
                yes(ok)
            ),
            None => println!("server RSS: the run ended within the {warm} warm-up; no verdict"),
        }
        match self.samples.p99_verdict() {
            Some((reference, bound, worst, ok)) => println!(
                "p99 after the warm-up: bound {bound:.1} ms (the warm-up's p99 {reference:.1} ms, x{P99_FACTOR} or \
                 +{P99_SLACK_MS} ms, the larger); worst window {:.1} ms (ending {}); within the bound: {}",
                worst.p99_or_stall(),
                mmss(worst.end),
                yes(ok)
            ),
            None => println!("p99: no window ended after the {warm} warm-up; no verdict"),
        }
    }
}
