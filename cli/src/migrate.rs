//! `waymark migrate`: brings the database's schema up to this build's — the default namespace's
//! and every other namespace's — for deployments whose replicas run with `--no-migrate` (a
//! database role without DDL rights). `--check` changes nothing and says whether it would.

use clap::Args;
use waymark_store::SchemaPolicy;

use waymark_server::namespaces::Storage;
use waymark_server::server::{open_store_with, DEFAULT_DATABASE_URL};

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// The database, as the servers are given it (`sqlite:<path>` or `postgres://…`), with a
    /// role that may change the schema.
    #[arg(long, default_value = DEFAULT_DATABASE_URL, env = "WAYMARK_DATABASE_URL")]
    pub database_url: String,
    /// Apply nothing: exit 0 when the schema is up to date, 1 (naming what is missing) when not.
    #[arg(long)]
    pub check: bool,
}

/// Most namespaces a server keeps (`--max-namespaces` is at most this).
const MAX_NAMESPACES: u32 = 10_000;

pub async fn run(args: MigrateArgs) -> anyhow::Result<i32> {
    let policy = if args.check {
        SchemaPolicy::Expect
    } else {
        SchemaPolicy::Migrate
    };
    let url = &args.database_url;
    let default = match open_store_with(url, false, 2, policy).await {
        Ok(store) => store,
        Err(e) if args.check => {
            println!("default\tbehind\t{e:#}");
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    println!("default\tup to date");
    let storage = Storage::for_url(url, false, 2, policy);
    let mut behind = 0;
    for namespace in default.list_namespaces(MAX_NAMESPACES).await? {
        if namespace.name == "default" {
            continue;
        }
        match storage.open(&namespace.name).await {
            Ok(_) => println!("{}\tup to date", namespace.name),
            Err(e) if args.check => {
                behind += 1;
                println!("{}\tbehind\t{e}", namespace.name);
            }
            Err(e) => anyhow::bail!("namespace {}: {e}", namespace.name),
        }
    }
    Ok(if behind > 0 { 1 } else { 0 })
}
