//! `Select`: a workflow waits for the first (or all) of several remote steps and workflows;
//! which one decided it is recorded as its step, so a replay picks the same. Until then
//! nothing is written, and the workflow is woken each time one of them finishes.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Fence, WaitFor, WaitTarget};

use super::command::{take_fence, About, Answer, Command};
use crate::engine::{validate, waits::step_waits::StepWaiter, Engine, EngineError, EngineResult, WorkerSession};

/// Most targets one "wait for the first of" may name.
pub const MAX_TARGETS: usize = 1000;

impl Command for v1::Select {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        use v1::recv_result::Outcome as O;
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let targets = self
            .targets
            .into_iter()
            .map(|t| match t.target {
                Some(v1::wait_target::Target::WorkflowId(id)) => Ok(WaitTarget::Workflow(id)),
                Some(v1::wait_target::Target::StepId(step)) => Ok(WaitTarget::Step(step)),
                None => Err(EngineError::invalid(
                    "every wait target needs a workflow_id or a step_id",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mode = if self.all { WaitFor::All } else { WaitFor::First };
        let selected = match run(engine, session, fence, self.step_id, targets, mode).await? {
            None => v1::Selected {
                outcome: O::Waiting as i32,
                index: 0,
            },
            Some(index) => v1::Selected {
                outcome: O::Delivered as i32,
                index,
            },
        };
        Ok(reply::Result::Selected(selected))
    }
}

/// Waits for the first (or all) of `targets`; `None` until decided. The waits are in place
/// before the store is asked.
async fn run(
    engine: &Engine,
    session: &Arc<WorkerSession>,
    fence: Fence,
    step_id: u32,
    targets: Vec<WaitTarget>,
    mode: WaitFor,
) -> EngineResult<Option<u32>> {
    engine.workers.worker_write(session, &fence, 0).await?;
    if targets.is_empty() || targets.len() > MAX_TARGETS {
        return Err(EngineError::invalid(format!(
            "a wait for the first of needs between 1 and {MAX_TARGETS} targets"
        )));
    }
    for t in &targets {
        match t {
            WaitTarget::Workflow(id) => {
                validate::name("target workflow_id", id)?;
                engine.workers.check_reach(session, id).await?;
                engine
                    .waits
                    .children
                    .add(id.clone(), StepWaiter::new(session, &fence, step_id));
            }
            WaitTarget::Step(s) => engine.waits.steps.add(
                (fence.workflow_id.clone(), *s),
                StepWaiter::new(session, &fence, step_id),
            ),
        }
    }
    let (store, now) = (engine.store(), engine.core.now());
    Ok(store.select_step(&fence, step_id, &targets, mode, now).await?)
}
