//! `CompleteWorkflow`: the workflow's outcome, with the last steps it held back.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Completed, NewStep, Outcome};

use super::{
    command::{payload_text, take_fence, About, Answer, Command},
    record_step::new_step,
};
use crate::{
    engine::{Engine, WorkerSession},
    wire::convert,
};

fn completed(c: Completed) -> v1::WorkflowCompleted {
    let wire = convert::workflow(c.workflow);
    v1::WorkflowCompleted {
        status: wire.status,
        output: wire.output,
        failure: wire.failure,
        adopted: c.adopted,
    }
}

impl Command for v1::CompleteWorkflow {
    fn about(&self) -> About<'_> {
        About {
            workflow_id: &self.workflow_id,
            epoch: Some(self.epoch),
            step_id: None,
        }
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        complete(engine, session, fence, self).await
    }
}

async fn complete(
    engine: &Engine,
    session: &WorkerSession,
    fence: waymark_store::Fence,
    c: v1::CompleteWorkflow,
) -> Answer {
    let now = engine.now_ms();
    if let Some(v1::complete_workflow::Outcome::ContinueAsNew(next)) = c.outcome {
        let input = payload_text("the next run's input", next.input.as_ref())?;
        let steps = c
            .steps
            .into_iter()
            .map(|r| new_step(r, now))
            .collect::<Result<Vec<NewStep>, _>>()?;
        let status = match engine.workers.continue_as_new(session, fence, steps, input).await? {
            Some(_) => v1::WorkflowStatus::ContinuedAsNew,
            // Its input was too large: the workflow failed instead.
            None => v1::WorkflowStatus::Error,
        };
        return Ok(reply::Result::WorkflowCompleted(v1::WorkflowCompleted {
            status: status as i32,
            ..Default::default()
        }));
    }
    let outcome = match c.outcome {
        Some(v1::complete_workflow::Outcome::Failure(f)) => Outcome::Failure(convert::failure_from_wire(&f)),
        Some(v1::complete_workflow::Outcome::Output(p)) => Outcome::Output(payload_text("workflow output", Some(&p))?),
        Some(v1::complete_workflow::Outcome::ContinueAsNew(_)) | None => {
            Outcome::Output(payload_text("workflow output", None)?)
        }
    };
    let steps = c
        .steps
        .into_iter()
        .map(|r| new_step(r, now))
        .collect::<Result<Vec<NewStep>, _>>()?;
    let done = engine.workers.complete_workflow(session, fence, steps, outcome).await?;
    Ok(reply::Result::WorkflowCompleted(completed(done)))
}
