//! Continue-as-new: a workflow that loops forever ends its run and goes on under its id with a
//! new input and an empty history, so its history never reaches a cap. The store keeps the
//! ended run's history under a row of its own (see the store's `continue_as_new`).

use waymark_store::{ContinuedAsNew, Fence, NewStep, Outcome};

use super::{validate, worker::Workers, EngineResult, WorkerSession};

impl Workers {
    /// Records the run's held-back `steps`, then ends the run and enqueues the next with
    /// `input`. An input over the payload limit fails the workflow instead (it would not
    /// shrink on a retry), as an oversized output does.
    pub async fn continue_as_new(
        &self,
        session: &WorkerSession,
        fence: Fence,
        steps: Vec<NewStep>,
        input: String,
    ) -> EngineResult<Option<ContinuedAsNew>> {
        if let Err(e) = validate::payload("the next run's input", &input, self.core.config.max_payload_bytes) {
            let failure = waymark_store::Failure {
                kind: e.reason.to_string(),
                message: e.message,
            };
            self.complete_workflow(session, fence, steps, Outcome::Failure(failure))
                .await?;
            return Ok(None);
        }
        self.worker_write(
            session,
            &fence,
            input.len() + steps.iter().map(Workers::step_bytes).sum::<usize>(),
        )
        .await?;
        validate::held_steps(&steps, self.core.config.max_payload_bytes)?;
        let steps_sent = steps.len();
        for step in steps {
            if let Err(e) = self.core.store.record_step(&fence, step, self.core.now()).await {
                return Err(self.refused_step(session, &fence, e).await);
            }
        }
        let done = match self.core.store.continue_as_new(&fence, &input, self.core.now()).await {
            Ok(done) => done,
            Err(e) => return Err(self.refused_ending(session, &fence, e).await),
        };
        session.let_go(&fence);
        if !done.adopted {
            self.core.counters.steps(steps_sent);
            self.core.counters.continued(&done.workflow);
            tracing::info!(workflow_id = %fence.workflow_id, ended_run = %done.ended_run, run = done.workflow.run,
                "continued as new");
        }
        self.core.work_enqueued();
        Ok(Some(done))
    }
}
