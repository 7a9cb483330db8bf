//! `waymark namespace …`: namespaces from a shell (an admin key with authentication on).

use clap::Subcommand;
use waymark_sdk::NamespaceInfo;

use super::{output, ConnectionArgs};

#[derive(Subcommand, Debug)]
pub enum NamespaceCommand {
    /// Create a namespace (1-40 of a-z, 0-9 and -).
    Create {
        name: String,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// List namespaces.
    List {
        #[command(flatten)]
        connection: ConnectionArgs,
        #[arg(long)]
        json: bool,
    },
    /// Show one namespace and whether it holds unfinished workflows.
    Describe {
        name: String,
        #[command(flatten)]
        connection: ConnectionArgs,
        #[arg(long)]
        json: bool,
    },
    /// Set a namespace's limits, each per replica (an admin key of every namespace). The limits
    /// are set whole: one not given is lifted (the server's caps still hold).
    Update {
        /// The namespace.
        name: String,
        /// StartWorkflow calls a second.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        start_rate: Option<u32>,
        /// Worker streams open at once.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_worker_streams: Option<u32>,
        /// Client calls waiting at once (AwaitWorkflow, GetEvent, ReadStream).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_waits: Option<u32>,
        #[command(flatten)]
        connection: ConnectionArgs,
        #[arg(long)]
        json: bool,
    },
    /// Delete a namespace and everything in it. Refused while it holds unfinished workflows,
    /// unless --force.
    Delete {
        name: String,
        #[arg(long)]
        force: bool,
        /// Delete without asking (needed when standard input is not a terminal).
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
}

fn print(namespaces: &[NamespaceInfo], json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(namespaces).expect("serializes"));
        return;
    }
    let rows: Vec<Vec<String>> = namespaces
        .iter()
        .map(|n| {
            let limit = |v: Option<u32>| v.map_or("-".to_string(), |n| n.to_string());
            let mut row = vec![
                n.name.clone(),
                output::time(n.created_at_ms),
                limit(n.limits.start_rate),
                limit(n.limits.max_worker_streams),
                limit(n.limits.max_waits),
            ];
            if let Some(u) = n.has_unfinished_workflows {
                row.push(if u { "yes" } else { "no" }.into());
            }
            row
        })
        .collect();
    let header: &[&str] = if namespaces.iter().any(|n| n.has_unfinished_workflows.is_some()) {
        &["NAME", "CREATED", "STARTS/S", "WORKER STREAMS", "WAITS", "UNFINISHED"]
    } else {
        &["NAME", "CREATED", "STARTS/S", "WORKER STREAMS", "WAITS"]
    };
    output::table(header, &rows);
}

pub async fn run(cmd: NamespaceCommand) -> anyhow::Result<i32> {
    match cmd {
        NamespaceCommand::Create { name, connection } => {
            let n = connection.connect().await?.create_namespace(&name).await?;
            print(&[n], false);
        }
        NamespaceCommand::List { connection, json } => {
            print(&connection.connect().await?.list_namespaces().await?, json);
        }
        NamespaceCommand::Describe { name, connection, json } => {
            let n = connection.connect().await?.describe_namespace(&name).await?;
            print(&[n], json);
        }
        NamespaceCommand::Update {
            name,
            start_rate,
            max_worker_streams,
            max_waits,
            connection,
            json,
        } => {
            let limits = waymark_sdk::NamespaceLimits {
                start_rate,
                max_worker_streams,
                max_waits,
            };
            let n = connection.connect().await?.update_namespace(&name, limits).await?;
            print(&[n], json);
        }
        NamespaceCommand::Delete {
            name,
            force,
            yes,
            connection,
        } => {
            if !super::confirm(yes, &format!("delete namespace {name} and every workflow in it"))? {
                return Ok(1);
            }
            connection.connect().await?.delete_namespace(&name, force).await?;
        }
    }
    Ok(0)
}
