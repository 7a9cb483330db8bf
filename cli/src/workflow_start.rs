//! `waymark workflow start` and `waymark workflow start-and-send`: the start options both take.

use std::time::Duration;

use clap::Args;
use waymark_sdk::StartOptions;

use super::{workflow_view::print_json, ClientArgs};
use waymark_server::duration::parse_duration;

/// A workflow to start: its name, input and start options.
#[derive(Args, Debug)]
pub struct StartArgs {
    /// Workflow name, as a worker registered it.
    pub name: String,
    /// Input as JSON, e.g. '"Ada"' or '{"n": 3}'.
    #[arg(long, default_value = "null")]
    pub input: String,
    /// Read the input (JSON) from this file instead; `-` reads standard input.
    #[arg(long, value_name = "FILE", conflicts_with = "input")]
    pub input_file: Option<std::path::PathBuf>,
    /// Workflow id (makes the start idempotent); generated when not given.
    #[arg(long)]
    pub id: Option<String>,
    #[arg(long)]
    pub queue: Option<String>,
    #[arg(long)]
    pub app_version: Option<String>,
    /// Cancel it (and its children) if not finished this long after the start, e.g. 10m.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Lower runs first within the queue (default 0).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// Its partition of the queue (a queue's partition concurrency limits each key).
    #[arg(long)]
    pub partition_key: Option<String>,
    /// Unique among the queue's unfinished workflows; a second start with it is refused.
    #[arg(long)]
    pub dedup_id: Option<String>,
    /// With --dedup-id: print the workflow holding the id instead of failing.
    #[arg(long, requires = "dedup_id")]
    pub return_existing: bool,
    /// Do not run it before this long from now, e.g. 30s.
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Collapse repeated starts with this key onto one delayed workflow (needs --delay).
    #[arg(long, requires = "delay")]
    pub debounce_key: Option<String>,
    /// With --debounce-key: the longest it may be put off in all (default ten times --delay).
    #[arg(long, value_parser = parse_duration, requires = "debounce_key")]
    pub debounce_max_delay: Option<Duration>,
    /// Enqueue it even if no worker has registered the name yet (it waits for one).
    #[arg(long)]
    pub allow_unregistered: bool,
    /// A tag, KEY=VALUE (repeatable); its children inherit it.
    #[arg(long = "tag", value_parser = super::parse_tag)]
    pub tags: Vec<(String, String)>,
}

impl StartArgs {
    /// The workflow's name, its input (parsed), and the options to start it with.
    fn parse(self) -> anyhow::Result<(String, serde_json::Value, StartOptions)> {
        let (input, from) = match self.input_file {
            Some(file) => (super::read_input(&file)?, format!("{}", file.display())),
            None => (self.input, "--input".to_string()),
        };
        let input: serde_json::Value =
            serde_json::from_str(&input).map_err(|e| super::invalid(format!("{from} is not valid JSON: {e}")))?;
        let options = StartOptions {
            workflow_id: self.id,
            queue: self.queue,
            app_version: self.app_version,
            timeout: self.timeout,
            priority: self.priority,
            partition_key: self.partition_key,
            dedup_id: self.dedup_id,
            return_existing: self.return_existing,
            delay: self.delay,
            debounce_key: self.debounce_key,
            debounce_max_delay: self.debounce_max_delay,
            allow_unregistered: self.allow_unregistered,
            tags: self.tags.into_iter().collect(),
        };
        Ok((self.name, input, options))
    }
}

fn note_unregistered(name: &str, registered: bool) {
    if !registered {
        eprintln!("note: no worker has registered {name:?} yet; the workflow waits ENQUEUED until one does");
    }
}

pub async fn start(args: StartArgs, client: ClientArgs) -> anyhow::Result<()> {
    let (name, input, options) = args.parse()?;
    let started = client.connect().await?.start_json(&name, input, options).await?;
    if client.json {
        print_json(&started);
    } else {
        println!("{}", started.workflow.workflow_id);
        note_unregistered(&name, started.name_registered);
    }
    Ok(())
}

pub async fn start_and_send(
    args: StartArgs,
    message: &str,
    topic: &str,
    idempotency_key: Option<&str>,
    client: ClientArgs,
) -> anyhow::Result<()> {
    let message: serde_json::Value =
        serde_json::from_str(message).map_err(|e| super::invalid(format!("--message is not valid JSON: {e}")))?;
    let (name, input, options) = args.parse()?;
    let done = client
        .connect()
        .await?
        .start_and_send(&name, &input, options, topic, &message, idempotency_key)
        .await?;
    if client.json {
        print_json(&done);
    } else {
        println!("{}", done.started.workflow.workflow_id);
        note_unregistered(&name, done.started.name_registered);
        if !done.started.created {
            eprintln!("already started under this id; the message went to it");
        }
        if done.duplicate {
            eprintln!("already sent with this idempotency key; not delivered again");
        }
    }
    Ok(())
}
