//! `waymark workflow delete|fork`: a workflow's records after its run.

use clap::Subcommand;
use waymark_sdk::ForkOptions;

use super::{
    workflow_view::{print_json, show},
    ClientArgs,
};

#[derive(Subcommand, Debug)]
pub enum LifecycleCommand {
    /// Delete a finished workflow and everything recorded for it (steps, messages, events,
    /// stream). Prints each id deleted.
    Delete {
        id: String,
        /// Delete its child workflows too, and theirs (each must have finished).
        #[arg(long)]
        cascade: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Start a new workflow from ID's history: its steps before --from-step are copied and
    /// replayed, the rest run again (on --app-version's workers if given). Prints the new id.
    Fork {
        id: String,
        /// Copy the steps before this position (default: all of them).
        #[arg(long)]
        from_step: Option<u32>,
        /// Run the fork on workers of this application version (the fixed code).
        #[arg(long)]
        app_version: Option<String>,
        /// The fork's id (default: generated).
        #[arg(long = "id")]
        new_id: Option<String>,
        /// The fork's queue (default: the source's).
        #[arg(long)]
        queue: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
}

pub async fn run(cmd: LifecycleCommand) -> anyhow::Result<i32> {
    match cmd {
        LifecycleCommand::Delete { id, cascade, client } => {
            let deleted = client.connect().await?.delete(&id, cascade).await?;
            if client.json {
                print_json(&serde_json::json!({ "deleted_workflow_ids": deleted }))
            } else {
                for id in deleted {
                    println!("{id} deleted");
                }
            }
        }
        LifecycleCommand::Fork {
            id,
            from_step,
            app_version,
            new_id,
            queue,
            client,
        } => {
            let options = ForkOptions {
                from_step,
                workflow_id: new_id,
                app_version,
                queue,
            };
            let fork = client.connect().await?.fork(&id, options).await?;
            if client.json {
                show(&fork, true)
            } else {
                println!("{}", fork.workflow_id);
            }
        }
    }
    Ok(0)
}
