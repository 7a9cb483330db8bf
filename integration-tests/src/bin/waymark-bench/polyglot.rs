//! The throughput workload (W workflows of K trivial steps) run by a worker process written in
//! another language, on a queue of its own so the in-process Rust workers do not take its
//! work; steps per second next to the Rust figure of the same run.
//!
//! Each language's bench worker is the `bench_worker` of its SDK's examples, started with
//! WAYMARK_SERVER, WAYMARK_QUEUE and WAYMARK_CAPACITY. A language whose worker cannot be
//! started (its dependencies not installed) is reported as skipped.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use waymark_sdk::{Client, ListOptions, StartOptions, WorkflowStatus};

use crate::verify::{expect_output, read_all, Select};

pub struct Polyglot {
    pub language: &'static str,
    pub steps_per_s: f64,
}

/// The repository root (the bench runs from it under `make bench`; found from the binary
/// otherwise).
fn root() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    exe.ancestors()
        .find(|p| p.join("sdk-clients").is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The languages with a bench worker, by name.
pub fn language(name: &str) -> anyhow::Result<&'static str> {
    ["python", "typescript", "go"]
        .into_iter()
        .find(|l| *l == name)
        .ok_or_else(|| anyhow::anyhow!("unknown language {name:?} (python, typescript or go)"))
}

/// The command that starts `language`'s bench worker, if its SDK is set up here.
fn worker_command(language: &str) -> Option<Command> {
    let sdk = root().join("sdk-clients").join(language);
    match language {
        "python" => {
            let python = sdk.join(".venv/bin/python");
            python.exists().then(|| {
                let mut c = Command::new(python);
                c.arg(sdk.join("examples/bench_worker.py"));
                c
            })
        }
        "typescript" => {
            let script = sdk.join("dist/examples/bench_worker.js");
            script.exists().then(|| {
                let mut c = Command::new("node");
                c.arg(script);
                c
            })
        }
        "go" => {
            let bin = sdk.join("bin/bench_worker");
            bin.exists().then(|| Command::new(bin))
        }
        _ => None,
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn unfinished(client: &Client, queue: &str) -> anyhow::Result<bool> {
    let (page, _) = client
        .list(ListOptions {
            statuses: vec![
                WorkflowStatus::Enqueued,
                WorkflowStatus::Pending,
                WorkflowStatus::Delayed,
            ],
            queue: Some(queue.into()),
            page_size: 1,
            ..Default::default()
        })
        .await?;
    Ok(!page.is_empty())
}

/// Runs W x K through `language`'s worker; `None` when its worker is not available.
pub async fn run(language: &'static str, addr: &str, workflows: usize, steps: u32) -> anyhow::Result<Option<Polyglot>> {
    let Some(mut command) = worker_command(language) else {
        eprintln!("  {language}: skipped (its SDK's dependencies are not installed)");
        return Ok(None);
    };
    let queue = format!("bench-{language}");
    let client = Client::connect(addr).await?;
    let _worker = Killed(
        command
            .env("WAYMARK_SERVER", addr)
            .env("WAYMARK_QUEUE", &queue)
            .env("WAYMARK_CAPACITY", "1000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    // Ready once a probe on its queue comes back.
    let probe = StartOptions {
        queue: Some(queue.clone()),
        ..StartOptions::id(format!("probe-{language}"))
    };
    let t = Instant::now();
    loop {
        match client
            .start_json("bench", serde_json::json!({"steps": 0}), probe.clone())
            .await
        {
            Ok(_) => break,
            Err(e) if e.reason() == Some("QUEUE_NOT_FOUND") => {}
            Err(e) => anyhow::bail!("{language}: probe refused: {e}"),
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(60),
            "the worker did not attach within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .await_workflow(&format!("probe-{language}"), Some(Duration::from_secs(60)))
        .await?;
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (client, next, queue) = (client.clone(), next.clone(), queue.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= workflows {
                    return Ok::<_, anyhow::Error>(());
                }
                let options = StartOptions {
                    queue: Some(queue.clone()),
                    ..StartOptions::id(format!("{queue}-{i}"))
                };
                client
                    .start_json("bench", serde_json::json!({ "steps": steps }), options)
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    while unfinished(&client, &queue).await? {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(600),
            "workflows still unfinished after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wall = t0.elapsed().as_secs_f64();
    let prefix = format!("{queue}-");
    let select = Select {
        workflow_name: Some("bench"),
        queue: Some(&queue),
        statuses: vec![],
        prefix: &prefix,
    };
    let found = read_all(&client, &select).await?;
    expect_output(workflows, &found, &serde_json::json!(steps))?;
    Ok(Some(Polyglot {
        language,
        steps_per_s: workflows as f64 * steps as f64 / wall,
    }))
}
