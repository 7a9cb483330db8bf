//! The unary API under load: StartWorkflow and GetWorkflow from 1 caller and from 50 concurrent
//! callers (over 8 connections, as a service with a client pool would), calls per second.
//!
//! It runs after the bench's workers have left. The started workflows are `noop` ones (a name
//! those workers registered) on a queue of their own, so they wait ENQUEUED and nothing claims
//! or runs them: the figure is the start itself (checks, the insert, its commit, the answer),
//! not the work behind it. Every start is read back
//! afterwards (each id once, ENQUEUED, with its own input) and every GetWorkflow answer is
//! checked against the id it asked for; a figure is printed only then.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Instant,
};

use anyhow::Context;
use waymark_sdk::{Client, ConnectOptions, QueueLimits, StartOptions, WorkflowStatus};

use crate::{
    verify::{expect, read_all, Select},
    workloads::percentile,
};

/// The workflow name the starts use: registered, so the start takes the usual path.
const NAME: &str = "noop";
/// Their queue, which no worker of the bench serves.
const QUEUE: &str = "unary";
/// Id prefix of this workload's workflows.
const PREFIX: &str = "un-";
/// Connections the concurrent callers share.
const CONNECTIONS: usize = 8;

/// One measured phase: `calls` calls of `rpc` by `callers` concurrent callers.
pub struct Rate {
    pub rpc: &'static str,
    pub callers: usize,
    pub calls: usize,
    pub per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

pub struct Unary {
    pub rates: Vec<Rate>,
}

impl Unary {
    pub fn rate(&self, rpc: &str, callers: usize) -> Option<&Rate> {
        self.rates.iter().find(|r| r.rpc == rpc && r.callers == callers)
    }
}

fn id(callers: usize, i: usize) -> String {
    format!("{PREFIX}{callers}-{i}")
}

/// Runs `calls` calls of `call(i)` from `callers` concurrent tasks; (calls/s, sorted ms).
async fn drive<F, Fut>(callers: usize, calls: usize, clients: &[Client], call: F) -> anyhow::Result<(f64, Vec<f64>)>
where
    F: Fn(Client, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (client, next, call) = (clients[c % clients.len()].clone(), next.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls {
                    return Ok::<_, anyhow::Error>(took);
                }
                let t = Instant::now();
                call(client.clone(), i).await?;
                took.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    let mut took = Vec::with_capacity(calls);
    for t in tasks {
        took.extend(t.await??);
    }
    let per_s = calls as f64 / t0.elapsed().as_secs_f64();
    took.sort_by(|a, b| a.total_cmp(b));
    Ok((per_s, took))
}

fn rate(rpc: &'static str, callers: usize, calls: usize, (per_s, took): (f64, Vec<f64>)) -> Rate {
    Rate {
        rpc,
        callers,
        calls,
        per_s,
        p50_ms: percentile(&took, 50.0),
        p99_ms: percentile(&took, 99.0),
    }
}

/// `starts` StartWorkflow calls from 50 callers (a tenth of them from one caller first), then
/// as many GetWorkflow calls of those workflows, checked.
pub async fn run(connect: &ConnectOptions, starts: usize) -> anyhow::Result<Unary> {
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        clients.push(Client::connect_with(connect).await?);
    }
    clients[0].create_queue(QUEUE, &QueueLimits::default()).await?;
    let mut rates = Vec::new();
    let mut started = Vec::new();
    for (callers, calls) in [(1, (starts / 10).max(1)), (50, starts)] {
        let clients = if callers == 1 { &clients[..1] } else { &clients[..] };
        let measured = drive(callers, calls, clients, move |client, i| async move {
            let options = StartOptions {
                queue: Some(QUEUE.into()),
                ..StartOptions::id(id(callers, i))
            };
            client
                .start_json(NAME, serde_json::json!({ "i": i }), options)
                .await
                .with_context(|| format!("StartWorkflow {}", id(callers, i)))?;
            Ok(())
        })
        .await?;
        rates.push(rate("StartWorkflow", callers, calls, measured));
        started.push((callers, calls));
    }

    // Every start is in the store, once, as it was sent.
    let select = Select {
        workflow_name: Some(NAME),
        queue: Some(QUEUE),
        statuses: vec![],
        prefix: PREFIX,
    };
    let found = read_all(&clients[0], &select).await?;
    let total = started.iter().map(|(_, n)| n).sum();
    expect(total, &found, WorkflowStatus::Enqueued, |w| {
        let i = w.workflow_id.rsplit('-').next().and_then(|i| i.parse::<usize>().ok());
        match i {
            Some(i) if w.input == serde_json::json!({ "i": i }) => Ok(()),
            _ => Err(format!("input {} does not match its id", w.input)),
        }
    })
    .context("reading the starts back")?;

    for (callers, calls) in started {
        let clients = if callers == 1 { &clients[..1] } else { &clients[..] };
        let measured = drive(callers, calls, clients, move |client, i| async move {
            let want = id(callers, i);
            let got = client.get(&want).await.with_context(|| format!("GetWorkflow {want}"))?;
            anyhow::ensure!(
                got.workflow_id == want && got.status == WorkflowStatus::Enqueued,
                "GetWorkflow {want} answered {} {}",
                got.workflow_id,
                got.status.as_str()
            );
            Ok(())
        })
        .await?;
        rates.push(rate("GetWorkflow", callers, calls, measured));
    }
    Ok(Unary { rates })
}
