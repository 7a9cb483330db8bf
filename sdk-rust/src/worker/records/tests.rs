//! The ordering and resend rules, against a connection the test answers by hand: no server.

use std::{
    sync::{atomic::AtomicBool, Arc, Mutex},
    time::Duration,
};

use tokio::sync::mpsc;

use crate::{
    worker::{
        conn::Conn,
        context::WorkflowContext,
        fake::{answer, answer_all, dispatch, fake_conn, recorded, settle, step_id, unavailable},
        records::Records,
        session,
    },
    Worker, WorkflowError,
};

fn context(conn: Arc<Conn>) -> (WorkflowContext, Arc<Records>) {
    let records = Arc::new(Records::default());
    let ctx = WorkflowContext::new(
        &dispatch(),
        conn,
        Arc::new(AtomicBool::new(false)),
        Default::default(),
        Default::default(),
        records.clone(),
        None,
    );
    (ctx, records)
}

#[tokio::test]
async fn steps_started_together_wait_for_the_record_taken_before_them() {
    let (conn, mut requests) = fake_conn(Duration::from_secs(60));
    let (ctx, _) = context(conn.clone());
    let ran = Arc::new(Mutex::new(Vec::new()));
    // `a` runs and its record is held back: nothing is sent yet.
    let a: u32 = ctx.step("a", || async { Ok::<_, String>(1) }).await.unwrap();
    assert_eq!(a, 1);
    let step = |name: &'static str| {
        let ran = ran.clone();
        ctx.step(name, move || {
            let ran = ran.clone();
            async move {
                ran.lock().unwrap().push(name);
                Ok::<_, String>(name.to_string())
            }
        })
    };
    let (c, d) = (step("c"), step("d"));
    let both = tokio::spawn(async move { tokio::join!(c, d) });
    // One of them flushes `a`'s record; hold its acknowledgement back.
    let record_a = requests.recv().await.unwrap();
    assert_eq!(step_id(&record_a), Some(0));
    settle().await;
    assert!(
        ran.lock().unwrap().is_empty(),
        "a step ran before the record taken before it was durable: {:?}",
        ran.lock().unwrap()
    );
    assert!(requests.try_recv().is_err(), "nothing else may be sent meanwhile");
    answer(&conn, &record_a, recorded());
    // From here on every record is acknowledged (the second of the two may flush the first's).
    let (answering, _) = answer_all(&conn, requests, |_| recorded());
    let (c, d) = both.await.unwrap();
    answering.abort();
    assert_eq!((c.unwrap().as_str(), d.unwrap().as_str()), ("c", "d"));
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["c", "d"]);
}

#[tokio::test]
async fn unavailable_is_resent_and_the_step_goes_on() {
    let (conn, mut requests) = fake_conn(Duration::from_secs(60));
    let (ctx, records) = context(conn.clone());
    let _: u32 = ctx.step("a", || async { Ok::<_, String>(1) }).await.unwrap();
    let ctx2 = ctx.clone();
    let b = tokio::spawn(async move { ctx2.step("b", || async { Ok::<_, String>(2) }).await });
    for _ in 0..2 {
        let m = requests.recv().await.unwrap();
        assert_eq!(step_id(&m), Some(0));
        answer(&conn, &m, unavailable());
    }
    let m = requests.recv().await.unwrap();
    assert_eq!(step_id(&m), Some(0), "the same record is sent again");
    answer(&conn, &m, recorded());
    assert_eq!(b.await.unwrap().unwrap(), 2);
    assert!(!records.is_dropped());
}

#[tokio::test]
async fn unavailable_past_the_bound_lets_the_run_go_and_nothing_runs_after() {
    let (conn, requests) = fake_conn(Duration::from_millis(300));
    let (ctx, records) = context(conn.clone());
    let _: u32 = ctx.step("a", || async { Ok::<_, String>(1) }).await.unwrap();
    let ran_b = Arc::new(AtomicBool::new(false));
    let flag = ran_b.clone();
    let ctx2 = ctx.clone();
    let b = tokio::spawn(async move {
        ctx2.step("b", move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            async { Ok::<_, String>(2) }
        })
        .await
    });
    let (answering, _) = answer_all(&conn, requests, |_| unavailable());
    assert!(matches!(b.await.unwrap(), Err(WorkflowError::Disconnected)));
    assert!(records.is_dropped());
    assert!(
        !ran_b.load(std::sync::atomic::Ordering::SeqCst),
        "b ran on a record that is not durable"
    );
    // Any later operation stops at once, without running or sending.
    let later = ctx.step("c", || async { Ok::<_, String>(3) }).await;
    assert!(matches!(later, Err(WorkflowError::Disconnected)));
    answering.abort();
}

#[tokio::test]
async fn a_run_let_go_never_completes_even_if_its_code_swallows_the_error() {
    let worker = Worker::builder()
        .resend_for(Duration::from_millis(200))
        .workflow("flow", |ctx: WorkflowContext, _: serde_json::Value| async move {
            let _: u32 = ctx.step("a", || async { Ok::<_, String>(1) }).await?;
            // The code treats the lost record as something to shrug off.
            let _ = ctx.step("b", || async { Ok::<_, String>(2) }).await;
            Ok("done".to_string())
        })
        .build();
    let (conn, requests) = fake_conn(Duration::from_millis(200));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let _run = session::start(&worker.config, conn.clone(), dispatch(), done_tx);
    let (answering, sent) = answer_all(&conn, requests, |_| unavailable());
    // The run ends and hands its slot back…
    assert_eq!(done_rx.recv().await, Some(("w".to_string(), 1)));
    settle().await;
    answering.abort();
    // …having sent only the record it could not make durable: no completion, no failure.
    let sent = sent.lock().unwrap();
    assert!(!sent.is_empty());
    for m in sent.iter() {
        assert_eq!(
            step_id(m),
            Some(0),
            "unexpected message from a run that was let go: {m:?}"
        );
    }
}
