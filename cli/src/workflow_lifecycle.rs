//! `waymark workflow delete|fork|set-version|bulk`: a workflow's records after its run, and
//! moving work between versions.

use clap::{Args, Subcommand, ValueEnum};
use waymark_sdk::{BulkAction, ForkOptions, WorkflowFilter, WorkflowStatus};

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
    /// Re-pin an unfinished workflow to another application version (its next dispatch goes to
    /// that version's workers, which replay its history).
    SetVersion {
        id: String,
        app_version: String,
        /// Re-pin even if no connected worker of that version registers the workflow's name.
        #[arg(long)]
        allow_unserved: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Cancel, resume, delete or re-pin every workflow the filters match, in batches; prints
    /// what was done and what was skipped (and why). Safe to run again. --dry-run only counts.
    Bulk {
        action: Bulk,
        #[command(flatten)]
        filter: FilterArgs,
        /// For set-version: the version to re-pin to.
        #[arg(long)]
        to_version: Option<String>,
        /// For set-version: even if no connected worker of that version registers the name.
        #[arg(long)]
        allow_unserved: bool,
        /// Count the workflows the filters match; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Cancel or delete without asking (needed when standard input is not a terminal).
        #[arg(long)]
        yes: bool,
        /// Workflows per batch (1-1000).
        #[arg(long, default_value_t = 100)]
        batch_size: i32,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// What `waymark workflow bulk` does to each workflow.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bulk {
    Cancel,
    Resume,
    Delete,
    SetVersion,
}

/// The filters of `waymark workflow list` and `workflow bulk`.
#[derive(Args, Debug)]
pub struct FilterArgs {
    /// Only this status (repeatable).
    #[arg(long)]
    status: Vec<String>,
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    queue: Option<String>,
    /// Only workflows running on (or last run by) this worker id.
    #[arg(long)]
    worker: Option<String>,
    /// Only workflows pinned to this application version.
    #[arg(long)]
    app_version: Option<String>,
    /// Only the children of this workflow.
    #[arg(long)]
    parent: Option<String>,
    /// Only workflows with this tag, KEY=VALUE (repeatable: all must match).
    #[arg(long = "tag", value_parser = super::parse_tag)]
    tags: Vec<(String, String)>,
    /// Only workflows whose id starts with this (a schedule's runs: `schedule:<name>:`).
    #[arg(long)]
    id_prefix: Option<String>,
    /// Only workflows created at or after this time (RFC 3339, e.g. 2026-12-01T00:00:00Z).
    #[arg(long, value_parser = parse_time)]
    created_after: Option<i64>,
    /// Only workflows created before this time (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    created_before: Option<i64>,
}

fn parse_time(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{s:?} is not an RFC 3339 time: {e}"))
}

impl FilterArgs {
    pub(super) fn filter(self) -> anyhow::Result<WorkflowFilter> {
        let statuses = self
            .status
            .iter()
            .map(|s| WorkflowStatus::parse(s).ok_or_else(|| super::invalid(format!("unknown status {s:?}"))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(WorkflowFilter {
            statuses,
            workflow_name: self.name,
            queue: self.queue,
            created_after_ms: self.created_after,
            created_before_ms: self.created_before,
            worker_id: self.worker,
            app_version: self.app_version,
            parent_workflow_id: self.parent,
            tags: self.tags.into_iter().collect(),
            workflow_id_prefix: self.id_prefix,
        })
    }
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
        LifecycleCommand::SetVersion {
            id,
            app_version,
            allow_unserved,
            client,
        } => {
            let w = client
                .connect()
                .await?
                .set_version(&id, &app_version, allow_unserved)
                .await?;
            show(&w, client.json)
        }
        LifecycleCommand::Bulk {
            action,
            filter,
            to_version,
            allow_unserved,
            dry_run,
            yes,
            batch_size,
            client,
        } => {
            let filter = filter.filter()?;
            let c = client.connect().await?;
            let destroys = matches!(action, Bulk::Cancel | Bulk::Delete);
            if destroys && !dry_run && !yes {
                let verb = if action == Bulk::Cancel { "cancel" } else { "delete" };
                // On a terminal, say how many before asking.
                let what = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                    let n = c.count_matching(&filter).await?;
                    format!("{verb} the {n} workflows the filters match")
                } else {
                    format!("{verb} every workflow the filters match")
                };
                let what = super::confirm(false, &what)?;
                if !what {
                    return Ok(1);
                }
            }
            if dry_run {
                let n = c.count_matching(&filter).await?;
                if client.json {
                    print_json(&serde_json::json!({ "matched": n }))
                } else {
                    println!("{n} workflows match");
                }
                return Ok(0);
            }
            let action = match action {
                Bulk::Cancel => BulkAction::Cancel,
                Bulk::Resume => BulkAction::Resume,
                Bulk::Delete => BulkAction::Delete,
                Bulk::SetVersion => BulkAction::SetVersion {
                    app_version: to_version.ok_or_else(|| super::invalid("set-version needs --to-version"))?,
                    allow_unserved,
                },
            };
            let done = c.bulk(&filter, &action, batch_size).await?;
            if client.json {
                print_json(&done)
            } else {
                println!("{} matched, {} changed", done.matched, done.applied);
                for (reason, n) in &done.skipped {
                    println!("{n} skipped: {reason}");
                }
            }
        }
    }
    Ok(0)
}
