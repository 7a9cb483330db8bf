//! The `counted` workload the crash and fault tests share: start a batch, watch its side
//! effects, and check afterwards that every workflow succeeded and every recorded step ran once
//! under the epoch that recorded it.

use std::{collections::HashMap, time::Duration};

use waymark_sdk::{Client, StartOptions, WorkflowStatus};

use crate::{side_effects, wait_for};

pub const PATIENCE: Duration = Duration::from_secs(180);

/// Starts `n` `counted` workflows of `steps` steps once a worker has registered it: they run as
/// they are started.
pub async fn start_batch(client: &Client, prefix: &str, n: usize, steps: u32, step_ms: u64) -> Vec<String> {
    crate::wait_for_registration(client, "counted").await;
    starts(client, prefix, n, steps, step_ms, false).await
}

/// Enqueues `n` `counted` workflows before any worker is there to take them, so a fault test's
/// milestones (counted in side effects) fall with the workload still queued, however fast the
/// workers are next to the starts.
pub async fn enqueue_batch(client: &Client, prefix: &str, n: usize, steps: u32, step_ms: u64) -> Vec<String> {
    starts(client, prefix, n, steps, step_ms, true).await
}

async fn starts(client: &Client, prefix: &str, n: usize, steps: u32, step_ms: u64, unregistered: bool) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}-{i}");
        let options = StartOptions {
            allow_unregistered: unregistered,
            ..StartOptions::id(&id)
        };
        client
            .start_json(
                "counted",
                serde_json::json!({"steps": steps, "step_ms": step_ms}),
                options,
            )
            .await
            .expect("start");
        ids.push(id);
    }
    ids
}

pub async fn recorded_steps(client: &Client, ids: &[String]) -> usize {
    let mut n = 0;
    for id in ids {
        n += client.steps(id).await.map(|s| s.len()).unwrap_or(0);
    }
    n
}

/// Waits until the workflows' steps have run `n` times in all (read from the side-effect log,
/// which costs no server round trips, so the run is caught mid-way).
pub async fn wait_for_effects(log: &std::path::Path, n: usize) {
    wait_for(&format!("{n} step side effects"), PATIENCE, || {
        let count = side_effects::read(log).len();
        async move { (count >= n).then_some(()) }
    })
    .await
}

pub async fn all_succeeded(client: &Client, ids: &[String], steps: u32) {
    for id in ids {
        let w = match client.await_workflow(id, Some(PATIENCE)).await {
            Ok(w) => w,
            // Say where it stands, to tell a stuck workflow from a slow one.
            Err(e) => panic!("{id} did not finish: {e}; now {:?}", client.get(id).await),
        };
        assert_eq!(w.status, WorkflowStatus::Success, "{id}: {w:?}");
        assert_eq!(w.output, Some(serde_json::json!(steps)), "{id}");
    }
}

/// Every recorded step ran exactly once under the epoch that recorded it, and never after it was
/// recorded. Extra runs are allowed only under older epochs (a worker that died between doing the
/// step and recording it), at most one per workflow (the step in flight when it died), unless the
/// test lets more through (`max_lost_per_workflow`).
pub async fn check_exactly_once(
    client: &Client,
    ids: &[String],
    steps: u32,
    log: &std::path::Path,
    max_lost_per_workflow: usize,
) {
    let effects = side_effects::read(log);
    let by_step = side_effects::by_step(&effects);
    let mut lost: HashMap<String, usize> = HashMap::new();
    for id in ids {
        let recorded = client.steps(id).await.expect("steps");
        assert_eq!(recorded.len(), steps as usize, "{id} has every step recorded");
        for s in &recorded {
            let runs = by_step.get(&(id.clone(), s.step_id)).cloned().unwrap_or_default();
            let under_recording_epoch = runs.iter().filter(|e| e.epoch == s.epoch).count();
            assert_eq!(
                under_recording_epoch, 1,
                "{id} step {} ran {under_recording_epoch} times under its recording epoch {}: {runs:?}",
                s.step_id, s.epoch
            );
            assert!(
                runs.iter().all(|e| e.epoch <= s.epoch),
                "{id} step {} ran again after it was recorded: {runs:?}",
                s.step_id
            );
            *lost.entry(id.clone()).or_default() += runs.len() - 1;
        }
    }
    for (id, n) in lost {
        assert!(
            n <= max_lost_per_workflow,
            "{id}: {n} unrecorded step runs (expected at most {max_lost_per_workflow})"
        );
    }
}

/// Starts of three-step `counted` workflows, one after another until stopped, each
/// acknowledged start noted: the load a backup is taken under.
pub struct SteadyStarts {
    acked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl SteadyStarts {
    pub fn start(client: &Client) -> SteadyStarts {
        let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn({
            let (client, acked) = (client.clone(), acked.clone());
            async move {
                let mut i = 0;
                while !*stopped.borrow() {
                    let id = format!("load-{i}");
                    let input = serde_json::json!({"steps": 3, "step_ms": 5});
                    if client.start_json("counted", input, StartOptions::id(&id)).await.is_ok() {
                        acked.lock().unwrap().push(id);
                    }
                    i += 1;
                }
            }
        });
        SteadyStarts { acked, stop, task }
    }

    /// The ids acknowledged so far, once there are at least `n`.
    pub async fn acknowledged(&self, n: usize) -> std::collections::HashSet<String> {
        wait_for(&format!("{n} acknowledged starts"), PATIENCE, || async {
            let acked = self.acked.lock().unwrap();
            (acked.len() >= n).then(|| acked.iter().cloned().collect())
        })
        .await
    }

    /// Stops the starts; how many were acknowledged in all.
    pub async fn stop(self) -> usize {
        let _ = self.stop.send(true);
        self.task.await.unwrap();
        let n = self.acked.lock().unwrap().len();
        n
    }
}
