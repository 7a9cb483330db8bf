//! Idle database load: many workflows parked in `recv` and nothing else happening; PostgreSQL's
//! transaction counter over a window.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use waymark_integration_tests::Backend;
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

use crate::{
    verify::{any_in, expect, expect_parked, read_all, Select, UNFINISHED},
    workloads::{unix_micros, wait_until_waiting},
};

/// PostgreSQL's transaction counter for the database at `url`, read on a fresh connection with
/// one simple-protocol query: exactly one transaction of our own, which the snapshot itself does
/// not include and which is flushed to the counter when the connection closes.
pub async fn pg_xacts(url: &str) -> anyhow::Result<i64> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let row = sqlx::raw_sql(
        "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await?;
    let n: i64 = row.try_get(0)?;
    conn.close().await?;
    Ok(n)
}

/// PostgreSQL (15+) backends report their transaction counts lazily — an idle backend flushes
/// them up to 10 s later — so the window opens only after the parking burst's counts have
/// surely landed; otherwise they are counted as idle load.
pub const SETTLE: Duration = Duration::from_secs(15);

/// Transactions of our own that `pg_xacts` adds to the counter between two of its reads.
pub const OWN_XACTS_PER_READ: i64 = 1;

pub struct Idle {
    pub window_s: f64,
    /// PostgreSQL only: (transactions/s, raw counter delta, own transactions subtracted).
    pub pg: Option<(f64, i64, i64)>,
}

/// Starts `n` waiters (10 min recv timeout), waits until every one is blocked in `recv`, lets the
/// server settle, then measures the database's transactions over `window`. Afterwards wakes every
/// waiter with a message and waits until all have finished.
pub async fn idle_load(n: usize, window: Duration, backend: Backend, db_url: &str, addr: &str) -> anyhow::Result<Idle> {
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(Client::connect(addr).await?);
    }
    let for_each = |f: fn(Client, String) -> futures::future::BoxFuture<'static, anyhow::Result<()>>| {
        let next = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for c in &clients {
            let (client, next) = (c.clone(), next.clone());
            handles.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, anyhow::Error>(());
                    }
                    f(client.clone(), format!("idle-{i}")).await?;
                }
            }));
        }
        async move {
            for h in handles {
                h.await??;
            }
            Ok::<_, anyhow::Error>(())
        }
    };

    let t0 = Instant::now();
    for_each(|client, id| {
        Box::pin(async move {
            client
                .start_json("waiter", serde_json::json!({"timeout_secs": 600}), StartOptions::id(id))
                .await?;
            Ok(())
        })
    })
    .await?;
    for_each(|client, id| Box::pin(async move { wait_until_waiting(&client, &id, Duration::from_millis(50)).await }))
        .await?;
    // A 10-minute wait is past the workers' park threshold: each waiter parks. Measure only
    // once all have, so the window sees a settled system rather than the parking itself.
    while any_in(
        &clients[0],
        "waiter",
        &[WorkflowStatus::Enqueued, WorkflowStatus::Pending],
    )
    .await?
    {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(300),
            "waiters still enqueued or running 300 s after their starts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // None running is not the same as all parked: count the parked ones in the store.
    expect_parked(&clients[0], "waiter", "idle-", n).await?;
    eprintln!(
        "[idle] {n} waiters parked after {:.2} s; settling {SETTLE:?}, then a {:?} window",
        t0.elapsed().as_secs_f64(),
        window
    );
    tokio::time::sleep(SETTLE).await;

    // Nothing of ours talks to the server during the window.
    let before = match backend {
        Backend::Postgres => Some(pg_xacts(db_url).await?),
        Backend::Sqlite => None,
    };
    let w0 = Instant::now();
    tokio::time::sleep(window).await;
    let after = match backend {
        Backend::Postgres => Some(pg_xacts(db_url).await?),
        Backend::Sqlite => None,
    };
    let window_s = w0.elapsed().as_secs_f64();
    let pg = match (before, after) {
        (Some(b), Some(a)) => {
            let raw = a - b;
            let own = OWN_XACTS_PER_READ;
            Some((((raw - own) as f64) / window_s, raw, own))
        }
        _ => None,
    };

    let t1 = Instant::now();
    for_each(|client, id| {
        Box::pin(async move {
            client.send_message(&id, "ping", &unix_micros(), None).await?;
            Ok(())
        })
    })
    .await?;
    let poller = &clients[0];
    while any_in(poller, "waiter", &UNFINISHED).await? {
        anyhow::ensure!(
            t1.elapsed() < Duration::from_secs(120),
            "waiters still unfinished 120 s after their messages"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let select = Select {
        workflow_name: Some("waiter"),
        queue: None,
        statuses: vec![],
        prefix: "idle-",
    };
    let found = read_all(poller, &select).await?;
    // Each waiter returns (sent, received); null would mean its recv timed out instead.
    expect(n, &found, WorkflowStatus::Success, |w| {
        match w.output.clone().map(serde_json::from_value::<(u64, u64)>) {
            Some(Ok(_)) => Ok(()),
            other => Err(format!("output {other:?}, expected [sent, received]")),
        }
    })?;
    eprintln!(
        "[idle] all {n} waiters woken and finished {:.2} s after the first send",
        t1.elapsed().as_secs_f64()
    );
    Ok(Idle { window_s, pg })
}
