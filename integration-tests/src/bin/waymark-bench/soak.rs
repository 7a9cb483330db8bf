//! `waymark-bench soak`: a long run on PostgreSQL with workers dying under it. One server (default
//! settings, as shipped) and several `waymark-test-worker` processes serving `counted`. First the
//! maximum rate is measured (a closed loop with as many workflows at once as the workers hold);
//! then workflows are started at half that rate, open loop, for `--minutes`, while a random
//! worker is killed with SIGKILL every 30-60 s and a new one started in its place. Every 30 s a
//! line gives the workflows finished in the window, their start->result p50/p99/max and the
//! server's RSS. At the end every workflow started must be SUCCESS with its output in the store
//! (none lost, none stuck, none failed), and the server's log must hold no panic and no ERROR
//! line, else the run exits non-zero; it also says whether RSS and p99 stayed within bounds after
//! the warm-up (see `soak_stats.rs`).
//!
//! ```text
//! make soak                                   # 10 minutes
//! SOAK_MINUTES=3 make soak
//! integration-tests/with-postgres.sh target/release/waymark-bench soak --minutes 3 --warmup-minutes 1
//! ```

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use rand::{rngs::StdRng, Rng, SeedableRng};
use tokio::task::JoinSet;
use waymark_integration_tests::{wait_for_registration, Backend, ServerProcess, TestDatabase, WorkerProcess};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

use crate::{
    machine,
    parked::rss_mb,
    soak_stats::{mmss, Samples, Summary, Window},
    verify::{expect_output, read_all, Select},
};

#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    /// Minutes of sustained load at half the measured maximum.
    #[arg(long, env = "SOAK_MINUTES", default_value_t = 10.0)]
    minutes: f64,
    /// Seconds of the maximum-rate measurement that comes first.
    #[arg(long, default_value_t = 20)]
    probe_secs: u64,
    /// Workflows started per second; when not given, half the measured maximum.
    #[arg(long)]
    rate: Option<f64>,
    /// Worker processes (waymark-test-worker).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Workflows each worker runs at once.
    #[arg(long, default_value_t = 50)]
    worker_capacity: u32,
    /// Steps of each `counted` workflow.
    #[arg(long, default_value_t = 3)]
    steps: u32,
    /// Shortest time between two worker kills, seconds.
    #[arg(long, default_value_t = 30)]
    kill_min_secs: u64,
    /// Longest time between two worker kills, seconds.
    #[arg(long, default_value_t = 60)]
    kill_max_secs: u64,
    /// Seconds between two report lines.
    #[arg(long, default_value_t = 30)]
    report_secs: u64,
    /// Minutes of warm-up before RSS and p99 are held to their bounds.
    #[arg(long, default_value_t = 2.0)]
    warmup_minutes: f64,
    /// Seed of the kill schedule (random when not given; printed either way, to replay it).
    #[arg(long)]
    seed: Option<u64>,
}

/// Workers killed, and how many of them held workflows when killed.
#[derive(Default)]
struct Kills {
    all: AtomicUsize,
    holding: AtomicUsize,
}

impl Kills {
    fn record(&self, held: usize) {
        self.all.fetch_add(1, Ordering::Relaxed);
        self.holding.fetch_add(usize::from(held > 0), Ordering::Relaxed);
    }
    fn count(&self) -> usize {
        self.all.load(Ordering::Relaxed)
    }
    fn holding(&self) -> usize {
        self.holding.load(Ordering::Relaxed)
    }
}

/// How long one workflow may take before it is reported stuck.
const PATIENCE: Duration = Duration::from_secs(300);

/// The worker processes, named w0, w1, ... in the order started.
struct Fleet {
    addr: String,
    dir: PathBuf,
    capacity: u32,
    started: usize,
    workers: Vec<(String, WorkerProcess)>,
}

impl Fleet {
    fn new(addr: &str, dir: &Path, capacity: u32) -> Fleet {
        Fleet {
            addr: addr.to_string(),
            dir: dir.to_path_buf(),
            capacity,
            started: 0,
            workers: Vec::new(),
        }
    }

    fn spawn(&mut self) -> String {
        let name = format!("w{}", self.started);
        self.started += 1;
        // The outcome is checked in the store; a side-effect log would only grow by a line per
        // step, millions over a run.
        let w = WorkerProcess::start_with_env(
            &self.addr,
            &self.dir.join("effects.log"),
            self.capacity,
            &name,
            &[("WAYMARK_SIDE_EFFECTS", "/dev/null")],
        );
        self.workers.push((name.clone(), w));
        name
    }

    /// Takes a random worker out of the fleet (to be killed).
    fn take_random(&mut self, rng: &mut StdRng) -> (String, WorkerProcess) {
        let i = rng.random_range(0..self.workers.len());
        self.workers.swap_remove(i)
    }
}

/// How many of the soak's workflows `worker` holds (PENDING with its id), so a kill line says
/// whether it hit work: the id is the one the test worker prints when it starts.
async fn holding(client: &Client, worker: &WorkerProcess) -> anyhow::Result<usize> {
    let log = worker.log_text();
    let id = log
        .lines()
        .find_map(|l| l.strip_prefix("test worker ")?.split_whitespace().next())
        .ok_or_else(|| anyhow::anyhow!("no worker id in {}", worker.log.display()))?;
    let select = Select {
        workflow_name: Some("counted"),
        queue: None,
        statuses: vec![WorkflowStatus::Pending],
        prefix: "soak-",
    };
    let pending = read_all(client, &select).await?;
    Ok(pending.iter().filter(|w| w.worker_id == id).count())
}

/// What the workflow tasks report.
#[derive(Default)]
struct Tally {
    /// Start->result of workflows finished since the reporter last took them, ms.
    window: Mutex<Vec<f64>>,
    /// Every start->result, ms.
    all: Mutex<Vec<f64>>,
    in_flight: AtomicUsize,
    /// Workflows that did not end SUCCESS with the right output, as seen by their task.
    problems: Mutex<Vec<String>>,
}

/// Starts workflow `id` (retrying a refused start with the same id: a start is idempotent by
/// id), waits for its result, and records start->result or what went wrong.
async fn one(client: Client, id: String, steps: u32, tally: Arc<Tally>) {
    tally.in_flight.fetch_add(1, Ordering::Relaxed);
    let t0 = Instant::now();
    let outcome = async {
        let mut attempt = 0u32;
        loop {
            match client
                .start_json("counted", serde_json::json!({ "steps": steps }), StartOptions::id(&id))
                .await
            {
                Ok(_) => break,
                Err(e) if attempt < 5 => {
                    attempt += 1;
                    eprintln!("[soak] start of {id} refused ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
                }
                Err(e) => return Err(format!("{id}: start refused: {e}")),
            }
        }
        loop {
            match client.await_workflow(&id, Some(Duration::from_secs(60))).await {
                Ok(w) if w.status == WorkflowStatus::Success && w.output == Some(serde_json::json!(steps)) => {
                    return Ok(())
                }
                Ok(w) => {
                    let output = w.output.map(|o| o.to_string()).unwrap_or_else(|| "none".into());
                    return Err(format!("{id}: ended {} with output {output}", w.status.as_str()));
                }
                Err(e) if t0.elapsed() < PATIENCE => {
                    // A deadline is only our own wait running out; anything else (the server
                    // busy) gets a pause before asking again.
                    if e.reason() != Some("DEADLINE_EXCEEDED") {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                Err(e) => return Err(format!("{id}: not finished after {PATIENCE:?}: {e}")),
            }
        }
    }
    .await;
    match outcome {
        Ok(()) => {
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            tally.window.lock().unwrap().push(ms);
            tally.all.lock().unwrap().push(ms);
        }
        Err(why) => tally.problems.lock().unwrap().push(why),
    }
    tally.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// The maximum rate: `at_once` loops each starting a workflow as soon as its last one finished,
/// for `secs`; workflows finished within that time per second. Returns (rate, ids used).
async fn probe(clients: &[Client], at_once: usize, secs: u64, steps: u32) -> anyhow::Result<(f64, usize)> {
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(secs);
    let mut loops = JoinSet::new();
    for i in 0..at_once {
        let (client, tally, next) = (clients[i % clients.len()].clone(), tally.clone(), next.clone());
        loops.spawn(async move {
            let mut in_time = 0usize;
            while Instant::now() < end {
                let id = format!("soak-max-{}", next.fetch_add(1, Ordering::Relaxed));
                one(client.clone(), id, steps, tally.clone()).await;
                in_time += usize::from(Instant::now() <= end);
            }
            in_time
        });
    }
    let mut finished = 0;
    while let Some(n) = loops.join_next().await {
        finished += n?;
    }
    let problems = tally.problems.lock().unwrap().clone();
    anyhow::ensure!(
        problems.is_empty(),
        "maximum-rate measurement: {} workflows went wrong, e.g. {}",
        problems.len(),
        problems[0]
    );
    let mut lat = tally.all.lock().unwrap().clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    let rate = finished as f64 / secs as f64;
    println!(
        "[soak] maximum: {finished} workflows finished in {secs} s with {at_once} at once = {rate:.1}/s \
         (start->result p50 {:.1} ms, p99 {:.1} ms)",
        crate::workloads::percentile(&lat, 50.0),
        crate::workloads::percentile(&lat, 99.0)
    );
    Ok((rate, next.load(Ordering::Relaxed)))
}

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.kill_min_secs > 0 && args.kill_min_secs <= args.kill_max_secs,
        "--kill-min-secs must be > 0 and <= --kill-max-secs"
    );
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        anyhow::bail!("the soak runs on PostgreSQL: run it through integration-tests/with-postgres.sh (make soak)");
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let mut rng = StdRng::seed_from_u64(seed);
    println!("machine: {}", machine::describe());
    println!(
        "database on {}",
        machine::database_filesystem(Backend::Postgres, &db.url, &db.dir).await
    );
    let server = ServerProcess::start(&db, &[]).await;
    eprintln!("[soak] server at {} (log: {})", server.addr, server.log.display());
    let fleet = Arc::new(Mutex::new(Fleet::new(&server.addr, &db.dir, args.worker_capacity)));
    for _ in 0..args.workers.max(1) {
        fleet.lock().unwrap().spawn();
    }
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(Client::connect(&server.addr).await?);
    }
    wait_for_registration(&clients[0], "counted").await;

    let at_once = args.workers.max(1) * args.worker_capacity as usize;
    let (max_rate, probe_ids) = probe(&clients, at_once, args.probe_secs, args.steps).await?;
    let rate = args.rate.unwrap_or(max_rate / 2.0);
    anyhow::ensure!(rate > 0.0, "a rate of {rate}/s would start nothing");
    let duration = Duration::from_secs_f64(args.minutes * 60.0);
    let warmup = Duration::from_secs_f64(args.warmup_minutes * 60.0);
    println!(
        "[soak] sustained load for {} at {rate:.1} workflows/s ({}), {} workers x {}, `counted` with {} steps; a worker \
         SIGKILLed every {}-{} s (seed {seed}); server with default settings (pid {})",
        mmss(duration),
        if args.rate.is_some() {
            "--rate"
        } else {
            "half the maximum"
        },
        args.workers,
        args.worker_capacity,
        args.steps,
        args.kill_min_secs,
        args.kill_max_secs,
        server.pid()
    );

    let tally = Arc::new(Tally::default());
    let kills = Arc::new(Kills::default());
    let t0 = Instant::now();
    let end = t0 + duration;

    // Kills: each at a random time 30-60 s after the one before (pacing by time is the point).
    let killer = {
        let (fleet, kills, client) = (fleet.clone(), kills.clone(), clients[0].clone());
        let (min, max) = (args.kill_min_secs, args.kill_max_secs);
        tokio::spawn(async move {
            loop {
                let wait = Duration::from_secs(rng.random_range(min..=max));
                if Instant::now() + wait >= end {
                    return;
                }
                tokio::time::sleep(wait).await;
                let (name, mut worker) = fleet.lock().unwrap().take_random(&mut rng);
                let held = holding(&client, &worker).await;
                let pid = worker.pid();
                worker.kill();
                let started = fleet.lock().unwrap().spawn();
                let held = match held {
                    Ok(n) => {
                        kills.record(n);
                        n.to_string()
                    }
                    Err(e) => {
                        kills.record(0);
                        format!("? ({e:#})")
                    }
                };
                println!(
                    "[soak] {} SIGKILL worker {name} (pid {pid}) holding {held} workflows; started {started}",
                    mmss(t0.elapsed())
                );
            }
        })
    };

    // Report lines, and RSS every second in between (the bound holds for every sample).
    let reporter = {
        let (tally, kills) = (tally.clone(), kills.clone());
        let server_pid = server.pid();
        let report_every = args.report_secs.max(1);
        tokio::spawn(async move {
            let mut samples = Samples::new(warmup);
            let first = tokio::time::Instant::from_std(t0) + Duration::from_secs(1);
            let mut tick = tokio::time::interval_at(first, Duration::from_secs(1));
            let mut second = 0u64;
            let mut window_start = Duration::ZERO;
            println!("{}", Window::header());
            loop {
                tick.tick().await;
                second += 1;
                let at = t0.elapsed();
                let rss = rss_mb(server_pid)?;
                samples.rss(at, rss);
                let last = Instant::now() >= end;
                if second.is_multiple_of(report_every) || last {
                    let finished = std::mem::take(&mut *tally.window.lock().unwrap());
                    let window = Window::new(window_start, at, &finished, rss);
                    println!(
                        "{}",
                        window.line(tally.in_flight.load(Ordering::Relaxed), kills.count())
                    );
                    samples.window(window, finished);
                    window_start = at;
                }
                if last {
                    return Ok::<_, anyhow::Error>(samples);
                }
            }
        })
    };

    // Open loop: workflows are started on schedule whether or not earlier ones have finished.
    let mut tasks = JoinSet::new();
    let mut issued = 0usize;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while Instant::now() < end {
        tick.tick().await;
        let due = (t0.elapsed().as_secs_f64() * rate) as usize;
        while issued < due {
            let client = clients[issued % clients.len()].clone();
            tasks.spawn(one(client, format!("soak-{issued}"), args.steps, tally.clone()));
            issued += 1;
        }
        while tasks.try_join_next().is_some() {}
    }
    let _ = killer.await;
    let samples = reporter.await??;
    eprintln!(
        "[soak] load stopped; waiting for the {} workflows in flight",
        tally.in_flight.load(Ordering::Relaxed)
    );
    while tasks.join_next().await.is_some() {}

    // The store is the judge: every id ever started, SUCCESS with output `steps`.
    let select = Select {
        workflow_name: Some("counted"),
        queue: None,
        statuses: vec![],
        prefix: "soak-",
    };
    let found = read_all(&clients[0], &select).await?;
    let started = probe_ids + issued;
    let verdict = expect_output(started, &found, &serde_json::json!(args.steps));
    let all = std::mem::take(&mut *tally.all.lock().unwrap());
    let problems = std::mem::take(&mut *tally.problems.lock().unwrap());
    Summary {
        duration: t0.elapsed(),
        rate,
        max_rate,
        started,
        succeeded: found
            .iter()
            .filter(|w| w.status == WorkflowStatus::Success && w.output == Some(serde_json::json!(args.steps)))
            .count(),
        kills: kills.count(),
        kills_holding: kills.holding(),
        latencies: all,
        samples,
    }
    .print();
    if !problems.is_empty() {
        println!(
            "[soak] {} workflows went wrong as their clients saw them, e.g. {}",
            problems.len(),
            problems[0]
        );
    }
    // Workers dying is all the soak does to the server: any panic or ERROR line is a fault.
    let log = server.check_log(&[]);
    if let Err(e) = &log {
        println!("[soak] {e}");
    }
    verdict.map_err(|e| anyhow::anyhow!("soak: workflows lost, stuck or failed: {e}"))?;
    anyhow::ensure!(
        problems.is_empty(),
        "soak: {} workflows went wrong (see above)",
        problems.len()
    );
    log.map_err(|_| anyhow::anyhow!("soak: the server logged a panic or an error (see above)"))
}
