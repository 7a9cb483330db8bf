//! Schedule decisions with a real SQLite store and a manual clock: validation, next fire times,
//! firing (missed times skipped), pause and resume, updates, triggers and backfills.

use std::sync::Arc;

use waymark_store::{sqlite::SqliteStore, ListQuery, Millis, WorkflowStatus};

use super::{cron::fire_workflow_id, scheduler::fire_due, NewSchedule, ScheduleChanges};
use crate::engine::{Engine, EngineConfig, ManualClock};

/// 2023-11-14T22:13:20Z, on a ten-second boundary.
const T0: Millis = 1_700_000_000_000;
const SEC: Millis = 1_000;

async fn engine_at(start: Millis) -> (Arc<Engine>, ManualClock) {
    let path = std::env::temp_dir().join(format!("waymark-sched-{}.db", uuid::Uuid::new_v4().simple()));
    let store = SqliteStore::open(&format!("sqlite:{}", path.display())).await.unwrap();
    let clock = ManualClock::new(start);
    (
        Engine::new(Arc::new(store), Arc::new(clock.clone()), EngineConfig::default()),
        clock,
    )
}

fn every_10s(name: &str) -> NewSchedule {
    NewSchedule {
        name: name.into(),
        cron: "*/10 * * * * *".into(),
        workflow_name: "report".into(),
        input: r#"{"k":1}"#.into(),
        ..Default::default()
    }
}

async fn workflow_ids(engine: &Engine) -> Vec<String> {
    let mut ids: Vec<String> = engine
        .core
        .store
        .list_workflows(&ListQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.workflow_id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn bad_input_is_refused_with_its_reason() {
    let (engine, _) = engine_at(T0).await;
    let reason =
        |r: Result<_, crate::engine::EngineError>| r.map(|_: waymark_store::ScheduleRecord| ()).unwrap_err().reason;
    let bad_cron = NewSchedule {
        cron: "every day".into(),
        ..every_10s("a")
    };
    assert_eq!(reason(engine.schedules().create(bad_cron).await), "INVALID_CRON");
    let bad_tz = NewSchedule {
        timezone: "Europe/Atlantis".into(),
        ..every_10s("a")
    };
    assert_eq!(reason(engine.schedules().create(bad_tz).await), "INVALID_TIMEZONE");
    let no_queue = NewSchedule {
        queue_name: "nowhere".into(),
        ..every_10s("a")
    };
    assert_eq!(reason(engine.schedules().create(no_queue).await), "QUEUE_NOT_FOUND");
    assert_eq!(
        reason(engine.schedules().create(every_10s("a b")).await),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        reason(engine.schedules().create(every_10s("")).await),
        "INVALID_ARGUMENT"
    );
    let nameless = NewSchedule {
        workflow_name: "".into(),
        ..every_10s("a")
    };
    assert_eq!(reason(engine.schedules().create(nameless).await), "INVALID_ARGUMENT");
    let past = NewSchedule {
        cron: "0 0 0 1 1 * 2020".into(),
        ..every_10s("a")
    };
    assert_eq!(reason(engine.schedules().create(past).await), "INVALID_CRON");
    engine.schedules().create(every_10s("a")).await.unwrap();
    assert_eq!(
        reason(engine.schedules().create(every_10s("a")).await),
        "SCHEDULE_EXISTS"
    );
    assert_eq!(reason(engine.schedules().get("nope").await), "SCHEDULE_NOT_FOUND");
}

#[tokio::test]
async fn created_schedules_take_defaults_and_their_first_fire_time() {
    let (engine, _) = engine_at(T0 + 3 * SEC).await;
    let s = engine.schedules().create(every_10s("a")).await.unwrap();
    assert_eq!(
        (s.state.spec.timezone.as_str(), s.state.spec.queue_name.as_str()),
        ("UTC", "default")
    );
    assert_eq!(s.state.next_fire_at, Some(T0 + 10 * SEC));
    let paused = NewSchedule {
        paused: true,
        ..every_10s("b")
    };
    assert_eq!(
        engine.schedules().create(paused).await.unwrap().state.next_fire_at,
        None
    );
}

#[tokio::test]
async fn next_fire_times_follow_the_time_zone_across_daylight_saving() {
    // Saturday 2026-03-07 12:00 UTC; New York moves to EDT overnight on Sunday.
    let sat_noon = 1_772_884_800_000;
    let (engine, clock) = engine_at(sat_noon).await;
    let daily = NewSchedule {
        cron: "30 9 * * *".into(),
        timezone: "America/New_York".into(),
        ..every_10s("daily")
    };
    let s = engine.schedules().create(daily).await.unwrap();
    // Saturday 09:30 EST has passed (14:30 UTC is still ahead): today, at UTC-5.
    assert_eq!(s.state.next_fire_at, Some(sat_noon + 2 * 3600 * SEC + 30 * 60 * SEC));
    clock.advance(3 * 3600 * SEC);
    assert_eq!(
        fire_due(&engine).await,
        Some(sat_noon + 24 * 3600 * SEC + 3600 * SEC + 30 * 60 * SEC),
        "Sunday 09:30 EDT is 13:30 UTC"
    );
    assert_eq!(workflow_ids(&engine).await, ["schedule:daily:2026-03-07T14:30:00Z"]);
}

#[tokio::test]
async fn due_schedules_fire_once_and_missed_times_are_skipped() {
    let (engine, clock) = engine_at(T0).await;
    engine.schedules().create(every_10s("tick")).await.unwrap();
    assert_eq!(fire_due(&engine).await, Some(T0 + 10 * SEC), "not due yet");
    assert!(workflow_ids(&engine).await.is_empty());

    clock.advance(10 * SEC);
    assert_eq!(fire_due(&engine).await, Some(T0 + 20 * SEC));
    assert_eq!(
        fire_due(&engine).await,
        Some(T0 + 20 * SEC),
        "a second pass fires nothing"
    );
    let first = fire_workflow_id("tick", T0 + 10 * SEC);
    assert_eq!(workflow_ids(&engine).await, std::slice::from_ref(&first));
    let w = engine.core.store.get_workflow(&first).await.unwrap().unwrap();
    assert_eq!(
        (
            w.status,
            w.workflow_name.as_str(),
            w.input.as_str(),
            w.queue_name.as_str()
        ),
        (WorkflowStatus::Enqueued, "report", r#"{"k":1}"#, "default")
    );

    // Everyone was down for 95 s: the latest due time fires once, the rest are skipped.
    clock.advance(95 * SEC);
    assert_eq!(fire_due(&engine).await, Some(T0 + 110 * SEC));
    assert_eq!(
        workflow_ids(&engine).await,
        [first, fire_workflow_id("tick", T0 + 100 * SEC)]
    );
    let s = engine.schedules().get("tick").await.unwrap();
    assert_eq!(
        (s.last_fire_at, s.state.next_fire_at),
        (Some(T0 + 100 * SEC), Some(T0 + 110 * SEC))
    );
}

#[tokio::test]
async fn paused_schedules_wait_and_resume_from_now() {
    let (engine, clock) = engine_at(T0).await;
    engine.schedules().create(every_10s("tick")).await.unwrap();
    let paused = engine.schedules().pause("tick").await.unwrap();
    assert!(paused.state.paused);
    assert_eq!(
        engine.schedules().pause("tick").await.unwrap().version,
        paused.version,
        "no-op"
    );
    clock.advance(60 * SEC + 500);
    assert_eq!(fire_due(&engine).await, None, "nothing to fire while paused");
    assert!(workflow_ids(&engine).await.is_empty());
    let resumed = engine.schedules().resume("tick").await.unwrap();
    assert_eq!(
        (resumed.state.paused, resumed.state.next_fire_at),
        (false, Some(T0 + 70 * SEC)),
        "the times passed while paused are not fired"
    );
}

#[tokio::test]
async fn updates_retime_only_when_the_timetable_changes() {
    let (engine, clock) = engine_at(T0).await;
    engine.schedules().create(every_10s("tick")).await.unwrap();
    clock.advance(2 * SEC);
    let changed_input = engine
        .schedules()
        .update(
            "tick",
            ScheduleChanges {
                input: Some("2".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            changed_input.state.spec.input.as_str(),
            changed_input.state.next_fire_at
        ),
        ("2", Some(T0 + 10 * SEC))
    );
    assert_eq!(changed_input.state.spec.cron, "*/10 * * * * *", "unnamed fields stay");
    let hourly = engine
        .schedules()
        .update(
            "tick",
            ScheduleChanges {
                cron: Some("0 * * * *".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(hourly.state.next_fire_at, Some(T0 + 2800 * SEC), "22:13:22 → 23:00:00");
    let bad = engine
        .schedules()
        .update(
            "tick",
            ScheduleChanges {
                timezone: Some("Nowhere/Land".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(bad.reason, "INVALID_TIMEZONE");
    let missing = engine
        .schedules()
        .update("nope", ScheduleChanges::default())
        .await
        .unwrap_err();
    assert_eq!(missing.reason, "SCHEDULE_NOT_FOUND");
}

#[tokio::test]
async fn backfills_start_each_fire_time_once_and_triggers_start_now() {
    let (engine, clock) = engine_at(T0).await;
    engine.schedules().create(every_10s("tick")).await.unwrap();
    clock.advance(60 * SEC);
    let runs = engine.schedules().backfill("tick", T0, T0 + 30 * SEC).await.unwrap();
    let times: Vec<Millis> = runs.iter().map(|(at, _)| *at).collect();
    assert_eq!(times, [T0, T0 + 10 * SEC, T0 + 20 * SEC, T0 + 30 * SEC]);
    assert!(runs
        .iter()
        .all(|(at, s)| s.created && s.workflow.workflow_id == fire_workflow_id("tick", *at)));
    let again = engine.schedules().backfill("tick", T0, T0 + 30 * SEC).await.unwrap();
    assert!(again.iter().all(|(_, s)| !s.created), "nothing new the second time");
    // The scheduler then fires only what is not there yet: the latest due time, 60 s.
    fire_due(&engine).await;
    assert_eq!(workflow_ids(&engine).await.len(), 5);

    let future = engine
        .schedules()
        .backfill("tick", T0, T0 + 3600 * SEC)
        .await
        .unwrap_err();
    assert_eq!(future.reason, "INVALID_ARGUMENT");
    let reversed = engine.schedules().backfill("tick", T0 + SEC, T0).await.unwrap_err();
    assert_eq!(reversed.reason, "INVALID_ARGUMENT");
    clock.advance(20_000 * SEC);
    let huge = engine
        .schedules()
        .backfill("tick", T0, T0 + 20_000 * SEC)
        .await
        .unwrap_err();
    assert!(huge.message.contains("more than 1000"));

    let paused = engine.schedules().pause("tick").await.unwrap();
    let t = engine.schedules().trigger("tick", "req-1").await.unwrap();
    assert_eq!(
        (t.created, t.workflow.workflow_id.as_str()),
        (true, "schedule:tick:trigger:req-1")
    );
    assert!(!engine.schedules().trigger("tick", "req-1").await.unwrap().created);
    let unnamed = engine.schedules().trigger("tick", "").await.unwrap();
    assert!(unnamed.workflow.workflow_id.starts_with("schedule:tick:trigger:2023-"));
    assert_eq!(
        engine.schedules().get("tick").await.unwrap().version,
        paused.version,
        "timetable untouched"
    );
    engine.schedules().delete("tick").await.unwrap();
    assert_eq!(
        engine.schedules().trigger("tick", "").await.unwrap_err().reason,
        "SCHEDULE_NOT_FOUND"
    );
    assert_eq!(workflow_ids(&engine).await.len(), 7, "deleting left the workflows");
}
