//! The store conformance suite: every behaviour the engine relies on, written once against
//! `dyn Store` and run against each backend, so the two implementations cannot drift apart.
//!
//! A backend's test file provides a fixture (a fresh, empty database per case) and expands
//! [`conformance_tests!`](crate::conformance_tests) into one `#[tokio::test]` per case:
//!
//! ```ignore
//! async fn fresh() -> Option<Fixture> { /* new database */ }
//! waymark_store_conformance::conformance_tests!(fresh);
//! ```
//!
//! Time is injected: every case runs at fixed instants around [`T`], so lease expiry and
//! recovery are tested without waiting.

use std::{future::Future, pin::Pin, sync::Arc};

use waymark_store::*;

mod children;
mod dispatch;
mod events;
pub mod fixtures;
mod flow;
mod keys;
mod lifecycle;
mod messages;
mod namespaces;
mod observe;
mod parking;
mod queues;
mod remote_steps;
mod runs;
mod schedules;
mod start_and_send;
mod steps;
mod streams;
mod tags;
mod transaction;
mod workflows;

pub use children::*;
pub use dispatch::*;
pub use events::*;
pub use flow::*;
pub use keys::*;
pub use lifecycle::*;
pub use messages::*;
pub use namespaces::*;
pub use observe::*;
pub use parking::*;
pub use queues::*;
pub use remote_steps::*;
pub use runs::*;
pub use schedules::*;
pub use start_and_send::*;
pub use steps::*;
pub use streams::*;
pub use tags::*;
pub use transaction::*;
pub use workflows::*;

/// One case's database: the store under test, and how to throw the database away afterwards.
/// Disposal runs only when the case passed, so a failed case leaves its data to inspect.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub dispose: Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Expands every conformance case into a `#[tokio::test]` that gets its store from `$fresh`,
/// an `async fn() -> Option<Fixture>` (`None` skips the case). A new case must be added to
/// this list as well as written in one of the submodules.
#[macro_export]
macro_rules! conformance_tests {
    ($fresh:path) => {
        $crate::conformance_tests!(@each $fresh;
            start_is_idempotent_on_id,
            concurrent_starts_each_get_their_own_answer,
            trace_context_travels_with_the_work,
            a_parked_workflow_says_what_it_waits_on,
            queues_are_counted_by_status,
            a_migrated_store_is_up_to_date,
            live_worker_streams_are_listed_with_what_they_declared,
            workflows_are_filtered_by_worker_version_and_parent_and_counted,
            unknown_workflow,
            list_filters_and_order,
            ids_are_filtered_by_prefix,
            list_pages_with_keyset,
            claim_filters,
            claim_limit_and_order,
            claims_take_lower_priority_first_then_oldest,
            claim_raises_epoch_and_returns_steps,
            concurrent_claims_take_each_workflow_once,
            record_step_outcomes,
            a_steps_start_is_kept_where_known,
            racing_records_of_one_step,
            completions_carry_their_last_steps,
            fenced_writes_race_redispatch,
            fencing_by_lease_expiry,
            recovery_dead_letters_past_limit,
            release_worker_takes_back_only_its_own,
            refused_writes_leave_the_workflow_claimable_at_once,
            release_lost_takes_back_only_what_is_still_at_that_epoch,
            release_unsent_takes_back_only_what_the_stream_was_never_sent,
            completion_is_status_gated,
            cancel_and_resume,
            deleting_a_finished_workflow_removes_everything_recorded_for_it,
            deleting_a_tree_takes_every_descendant_only_once_all_have_finished,
            a_cascade_over_the_bound_is_refused,
            the_collector_deletes_what_a_rule_covers_oldest_first_in_batches,
            a_fork_copies_the_history_before_its_step_and_records_its_lineage,
            resuming_an_error_reruns_its_failed_step,
            continuing_as_new_keeps_the_run_apart_and_enqueues_a_fresh_one,
            tags_are_kept_matched_all_of_copied_by_a_fork_and_deleted_with_the_workflow,
            prune_sessions_only_idle_expired,
            a_worker_id_is_held_by_the_key_of_its_live_stream,
            old_stream_workflows_recovered_despite_new_stream,
            start_with_assignment_dispatches_at_once,
            send_to_unknown_workflow_is_not_found,
            send_to_a_workflow_that_ended_with_an_outcome_is_refused,
            a_full_inbox_refuses_sends_until_one_is_read,
            sends_with_one_idempotency_key_deliver_once,
            start_and_send_starts_once_and_delivers_once_per_key,
            start_and_send_refused_writes_nothing,
            concurrent_receivers_take_each_message_once,
            a_send_completes_a_waiting_receive_in_its_transaction,
            concurrent_delivering_sends_complete_a_receive_once,
            a_delivering_send_refuses_what_a_plain_send_refuses,
            events_are_read_back_with_their_history,
            streams_are_read_from_an_offset,
            a_workflows_streams_are_listed_with_their_length,
            transactions_write_only_when_committed,
            transactions_fence_and_detect_replays,
            transactions_insert_children_once,
            deadlines_cancel_and_children_inherit_them,
            parked_workflows_wake_when_their_wait_resolves,
            parked_parents_wake_when_the_awaited_workflow_finishes,
            remote_step_calls_queue_once_and_record_their_result,
            remote_step_failures_retry_with_backoff_then_record,
            remote_step_attempts_time_out_and_parked_callers_wake,
            concurrent_step_claims_take_each_call_once,
            select_records_the_first_to_finish,
            workflow_names_are_remembered,
            concurrent_registrations_of_the_same_names_all_succeed,
            queues_are_created_changed_and_removed,
            limited_claims_keep_global_and_worker_concurrency,
            rate_limits_count_starts_in_a_sliding_window,
            partitions_run_within_their_limit_and_take_turns,
            direct_dispatch_leaves_limited_queues_to_their_claim,
            dedup_ids_are_unique_among_a_queues_live_workflows,
            delayed_starts_wait_and_can_be_moved,
            debounced_starts_collapse_onto_one_delayed_workflow,
            schedules_are_created_changed_and_removed,
            racing_fires_of_a_schedule_start_one_workflow,
            paused_schedules_do_not_fire,
            backfills_start_one_workflow_per_fire_time,
            triggers_start_now_even_when_paused,
            deleting_a_schedule_leaves_its_workflows,
            api_keys_are_stored_listed_and_revoked,
            namespaces_are_listed_added_and_removed,
        );
    };
    (@each $fresh:path; $($case:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $case() {
            let Some(fixture) = $fresh().await else { return };
            $crate::$case(fixture.store.clone()).await;
            drop(fixture.store);
            fixture.dispose.await;
        }
    )*};
}

/// The instant every case starts at (milliseconds since the Unix epoch).
pub const T: Millis = 1_700_000_000_000;
pub const V1: &str = "v1";

pub fn wf(id: &str, name: &str, queue: &str) -> NewWorkflow {
    NewWorkflow {
        workflow_id: id.to_string(),
        workflow_name: name.to_string(),
        queue_name: queue.to_string(),
        app_version: None,
        input: format!(r#"{{"id":"{id}"}}"#),
        parent_workflow_id: None,
        deadline_at: None,
        priority: 0,
        assign: None,
        ..Default::default()
    }
}

/// The stream a test worker claims on: one per worker unless a case says otherwise.
pub fn session(worker: &str) -> String {
    format!("{worker}/stream-1")
}

pub fn claim(worker: &str, names: &[&str], queues: &[&str], limit: u32) -> Claim {
    Claim {
        worker_id: worker.to_string(),
        session_id: session(worker),
        app_version: V1.to_string(),
        workflow_names: names.iter().map(|s| s.to_string()).collect(),
        queues: queues.iter().map(|s| s.to_string()).collect(),
        limit,
    }
}

pub fn step(step_id: u32, name: &str, output: &str) -> NewStep {
    NewStep {
        step_id,
        name: name.to_string(),
        outcome: Outcome::Output(output.to_string()),
        attempts: 1,
        started_at: None,
    }
}

pub fn fence(id: &str, epoch: u64) -> Fence {
    Fence {
        workflow_id: id.to_string(),
        epoch,
    }
}

pub fn failure(kind: &str) -> Outcome {
    Outcome::Failure(Failure {
        kind: kind.to_string(),
        message: format!("{kind} happened"),
    })
}

pub fn ids(claimed: &[ClaimedWorkflow]) -> Vec<&str> {
    claimed.iter().map(|c| c.workflow.workflow_id.as_str()).collect()
}

pub fn list_ids(list: &[WorkflowRecord]) -> Vec<&str> {
    list.iter().map(|w| w.workflow_id.as_str()).collect()
}

pub async fn start(s: &dyn Store, new: NewWorkflow, now: Millis) -> WorkflowRecord {
    let started = s.start_workflow(new, now).await.expect("start");
    assert!(started.created);
    started.workflow
}

pub async fn get(s: &dyn Store, id: &str) -> WorkflowRecord {
    s.get_workflow(id).await.expect("get").expect("exists")
}

/// Claims exactly the workflow `id` (the only runnable one of its name) for `worker`.
pub async fn claim_one(s: &dyn Store, worker: &str, name: &str, id: &str, now: Millis) -> u64 {
    let got = s
        .claim_workflows(&claim(worker, &[name], &["q"], 1), now)
        .await
        .expect("claim");
    assert_eq!(ids(&got), [id], "claim by {worker}");
    got[0].workflow.epoch
}
