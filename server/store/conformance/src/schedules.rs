//! Schedule cases: create, read, list, fenced update, delete; one workflow and one advance per
//! fire however many replicas race; paused schedules do not fire; starts outside the timetable
//! (trigger, backfill) are idempotent per id; deleting a schedule leaves its workflows.
//!
//! The store does no cron math, so the fire times here are plain numbers a second apart.

use super::*;

const SEC: Millis = 1_000;

fn spec(workflow: &str) -> ScheduleSpec {
    ScheduleSpec {
        cron: "* * * * * *".into(),
        timezone: "UTC".into(),
        workflow_name: workflow.into(),
        input: r#"{"n":1}"#.into(),
        queue_name: "q".into(),
    }
}

fn running(workflow: &str, next: Millis) -> ScheduleState {
    ScheduleState {
        spec: spec(workflow),
        paused: false,
        next_fire_at: Some(next),
    }
}

/// The workflow of schedule `name` for fire time `at`, shaped as the engine would ask for it.
fn run(name: &str, at: Millis) -> NewWorkflow {
    wf(&format!("schedule:{name}:{at}"), "A", "q")
}

fn fire(s: &ScheduleRecord, at: Millis, next: Millis) -> ScheduleFire {
    ScheduleFire {
        name: s.name.clone(),
        version: s.version,
        fire_at: at,
        next_fire_at: Some(next),
        workflow: run(&s.name, at),
    }
}

async fn sched(s: &dyn Store, name: &str) -> ScheduleRecord {
    s.get_schedule(name).await.expect("get").expect("exists")
}

pub async fn schedules_are_created_changed_and_removed(s: Arc<dyn Store>) {
    let s = &*s;
    let created = s.create_schedule("nightly", &running("A", T + SEC), T).await.unwrap();
    assert_eq!(
        (
            created.name.as_str(),
            &created.state,
            created.version,
            created.last_fire_at,
            created.created_at
        ),
        ("nightly", &running("A", T + SEC), 1, None, T)
    );
    assert!(matches!(
        s.create_schedule("nightly", &running("B", T), T + 1).await,
        Err(StoreError::ScheduleExists(n)) if n == "nightly"
    ));
    assert_eq!(sched(s, "nightly").await.state.spec.workflow_name, "A", "unchanged");

    // An update applies only at the version it read.
    let mut changed = running("B", T + 5 * SEC);
    changed.spec.cron = "*/5 * * * * *".into();
    let updated = s.update_schedule("nightly", 1, &changed, T + 2).await.unwrap().unwrap();
    assert_eq!(
        (&updated.state, updated.version, updated.updated_at),
        (&changed, 2, T + 2)
    );
    assert_eq!(
        s.update_schedule("nightly", 1, &running("C", T), T + 3).await.unwrap(),
        None,
        "a stale version writes nothing"
    );
    assert_eq!(sched(s, "nightly").await.state, changed);
    assert!(matches!(
        s.update_schedule("nope", 1, &changed, T + 3).await,
        Err(StoreError::ScheduleNotFound(n)) if n == "nope"
    ));

    // Listing is by name; the scheduler's read is by next fire time, unpaused only.
    s.create_schedule("hourly", &running("A", T + 2 * SEC), T)
        .await
        .unwrap();
    let paused = ScheduleState {
        paused: true,
        next_fire_at: None,
        ..running("A", T)
    };
    s.create_schedule("asleep", &paused, T).await.unwrap();
    let names: Vec<String> = s.list_schedules().await.unwrap().into_iter().map(|x| x.name).collect();
    assert_eq!(names, ["asleep", "hourly", "nightly"]);
    let upcoming: Vec<String> = s
        .upcoming_schedules(10)
        .await
        .unwrap()
        .into_iter()
        .map(|x| x.name)
        .collect();
    assert_eq!(upcoming, ["hourly", "nightly"]);
    assert_eq!(s.upcoming_schedules(1).await.unwrap().len(), 1);

    assert!(s.delete_schedule("hourly").await.unwrap());
    assert!(!s.delete_schedule("hourly").await.unwrap());
    assert!(s.get_schedule("hourly").await.unwrap().is_none());
}

pub async fn racing_fires_of_a_schedule_start_one_workflow(s: Arc<dyn Store>) {
    let due = s.create_schedule("tick", &running("A", T), T - SEC).await.unwrap();
    // Every replica read the same due schedule and planned the same fire.
    let plan = fire(&due, T, T + SEC);
    let racers: Vec<_> = (0..4)
        .map(|_| {
            let (s, plan) = (s.clone(), plan.clone());
            tokio::spawn(async move { s.fire_schedule(&plan, T + 10).await.unwrap() })
        })
        .collect();
    let mut fired = Vec::new();
    for r in racers {
        if let Some(started) = r.await.unwrap() {
            fired.push(started);
        }
    }
    assert_eq!(fired.len(), 1, "exactly one replica fires");
    assert!(fired[0].created);
    assert_eq!(fired[0].workflow.workflow_id, plan.workflow.workflow_id);
    assert_eq!(fired[0].workflow.status, WorkflowStatus::Enqueued);
    let after = sched(&*s, "tick").await;
    assert_eq!(
        (after.state.next_fire_at, after.last_fire_at, after.version),
        (Some(T + SEC), Some(T), due.version + 1),
        "advanced once"
    );
    let runs = s
        .list_workflows(&ListQuery {
            workflow_name: Some("A".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(list_ids(&runs), [plan.workflow.workflow_id.as_str()]);
    // A fire planned from the old version (a replica that read before the first fire) is refused.
    assert!(s.fire_schedule(&plan, T + 20).await.unwrap().is_none());
    // The next fire goes from the new version.
    let next = s
        .fire_schedule(&fire(&after, T + SEC, T + 2 * SEC), T + SEC)
        .await
        .unwrap();
    assert!(next.is_some_and(|n| n.created));
}

pub async fn paused_schedules_do_not_fire(s: Arc<dyn Store>) {
    let s = &*s;
    let live = s.create_schedule("tick", &running("A", T), T - SEC).await.unwrap();
    let paused = ScheduleState {
        paused: true,
        next_fire_at: None,
        ..live.state.clone()
    };
    let asleep = s
        .update_schedule("tick", live.version, &paused, T)
        .await
        .unwrap()
        .unwrap();
    assert!(s.upcoming_schedules(10).await.unwrap().is_empty());
    // Neither a fire planned before the pause nor one at the paused version goes through.
    assert!(s.fire_schedule(&fire(&live, T, T + SEC), T).await.unwrap().is_none());
    assert!(s.fire_schedule(&fire(&asleep, T, T + SEC), T).await.unwrap().is_none());
    assert!(s.get_workflow(&run("tick", T).workflow_id).await.unwrap().is_none());
    assert_eq!(sched(s, "tick").await.last_fire_at, None);
}

pub async fn backfills_start_one_workflow_per_fire_time(s: Arc<dyn Store>) {
    let s = &*s;
    let sc = s.create_schedule("tick", &running("A", T + 10 * SEC), T).await.unwrap();
    let times = [T + SEC, T + 2 * SEC, T + 3 * SEC];
    let runs: Vec<NewWorkflow> = times.iter().map(|&at| run("tick", at)).collect();
    let first = s.start_scheduled("tick", &runs, T + 20 * SEC).await.unwrap();
    assert!(first.iter().all(|x| x.created));
    assert_eq!(first.len(), 3);
    // Again: nothing new.
    let again = s.start_scheduled("tick", &runs, T + 21 * SEC).await.unwrap();
    assert!(again.iter().all(|x| !x.created));
    let ids: Vec<&str> = again.iter().map(|x| x.workflow.workflow_id.as_str()).collect();
    assert_eq!(ids, runs.iter().map(|r| r.workflow_id.as_str()).collect::<Vec<_>>());
    // The schedule's own row is not touched by a backfill.
    assert_eq!(sched(s, "tick").await.version, sc.version);
    // A fire time the backfill already started: the fire advances the schedule and starts nothing.
    let overlap = ScheduleFire {
        fire_at: T + 3 * SEC,
        workflow: run("tick", T + 3 * SEC),
        ..fire(&sc, T + 3 * SEC, T + 4 * SEC)
    };
    let fired = s.fire_schedule(&overlap, T + 22 * SEC).await.unwrap().unwrap();
    assert!(!fired.created);
    assert_eq!(sched(s, "tick").await.state.next_fire_at, Some(T + 4 * SEC));
    let all = s
        .list_workflows(&ListQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 3, "one workflow per fire time");
    assert!(matches!(
        s.start_scheduled("nope", &runs, T).await,
        Err(StoreError::ScheduleNotFound(_))
    ));
}

pub async fn triggers_start_now_even_when_paused(s: Arc<dyn Store>) {
    let s = &*s;
    let paused = ScheduleState {
        paused: true,
        next_fire_at: None,
        ..running("A", T)
    };
    s.create_schedule("manual", &paused, T).await.unwrap();
    let new = wf("schedule:manual:trigger:r1", "A", "q");
    let started = s
        .start_scheduled("manual", std::slice::from_ref(&new), T + 1)
        .await
        .unwrap();
    assert!(started[0].created);
    assert_eq!(
        (started[0].workflow.status, started[0].workflow.input.as_str()),
        (WorkflowStatus::Enqueued, new.input.as_str())
    );
    let retried = s.start_scheduled("manual", &[new], T + 2).await.unwrap();
    assert!(!retried[0].created, "a retried trigger starts nothing new");
    let after = sched(s, "manual").await;
    assert_eq!((after.last_fire_at, after.version), (None, 1));
}

pub async fn deleting_a_schedule_leaves_its_workflows(s: Arc<dyn Store>) {
    let s = &*s;
    let sc = s.create_schedule("tick", &running("A", T), T - SEC).await.unwrap();
    let fired = s.fire_schedule(&fire(&sc, T, T + SEC), T).await.unwrap().unwrap();
    assert!(s.delete_schedule("tick").await.unwrap());
    let w = get(s, &fired.workflow.workflow_id).await;
    assert_eq!(w.status, WorkflowStatus::Enqueued);
    // A fire planned before the delete finds nothing to move and starts nothing.
    let late = fire(&sc, T + SEC, T + 2 * SEC);
    assert!(s.fire_schedule(&late, T + SEC).await.unwrap().is_none());
    assert!(s.get_workflow(&late.workflow.workflow_id).await.unwrap().is_none());
}
