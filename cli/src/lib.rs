//! The `waymark` command line: `waymark server` runs the server; `waymark workflow …` drives one.
//!
//! Exit codes: 0 success; 1 the request failed for another reason (the message says why);
//! 2 bad usage; 3 `await` saw the workflow end without success; 4 `event` found the event not
//! set; 5 not found (workflow, queue, schedule); 6 invalid input; 7 the server (or its database)
//! is unavailable: try again; 8 refused: no valid API key, or one that may not do this.

use clap::{Args, Parser, Subcommand};

use waymark_server::{
    api::observe::AccessLog,
    duration::parse_duration,
    server::{ServerOptions, DEFAULT_DATABASE_URL, DEFAULT_LISTEN},
};

pub mod backup;
pub mod health;
pub mod key;
pub mod migrate;
pub mod namespace;
mod output;
pub mod queue;
pub mod schedule;
pub mod settings;
pub mod worker;
pub mod workflow;
mod workflow_lifecycle;
mod workflow_start;
mod workflow_view;

#[derive(Parser)]
#[command(
    name = "waymark",
    version,
    about = "Waymark: durable execution for functions in any language",
    after_help = "Exit codes: 0 success; 1 the request failed (the message says why); 2 bad usage; \
3 `workflow await` saw the workflow end without success; 4 `workflow event` found the event not set; \
5 not found; 6 invalid input; 7 the server or its database is unavailable (try again); \
8 refused (no valid API key, or one that may not do this)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the server.
    Server(ServerArgs),
    /// Start, inspect and control workflows.
    #[command(subcommand)]
    Workflow(workflow::WorkflowCommand),
    /// Create queues and set their limits.
    #[command(subcommand)]
    Queue(queue::QueueCommand),
    /// Start workflows on a cron schedule: create, pause, resume, trigger, backfill.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// API keys: create (shown once), list, revoke. Needs an admin key, or --database-url to
    /// write the first one straight into the database.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Namespaces: create, list, describe, delete. Needs an admin key with --auth.
    #[command(subcommand)]
    Namespace(namespace::NamespaceCommand),
    /// The workers connected to the server.
    #[command(subcommand)]
    Worker(worker::WorkerCommand),
    /// Copy an embedded (SQLite) database while the server runs: consistent, every namespace.
    Backup(backup::BackupArgs),
    /// Apply the database migrations this build needs (every namespace), for servers started
    /// with --no-migrate; `--check` only says whether any are missing.
    Migrate(migrate::MigrateArgs),
    /// Ask a server's ops listener (--metrics-listen) whether it is alive, or with --ready
    /// whether it can do work: exit 0 if so, 1 if not (for a container's health check).
    Health(health::HealthArgs),
    /// Print a shell completion script: `source <(waymark completion bash)`, or save it where
    /// your shell loads completions from (zsh: a `_waymark` file on $fpath; fish:
    /// ~/.config/fish/completions/waymark.fish).
    Completion { shell: clap_complete::Shell },
}

#[derive(Args, Debug)]
#[command(args_override_self = true)]
pub struct ServerArgs {
    /// Read settings from this TOML file: the long names of these flags as keys
    /// (`worker-lease = "1h30m"`, `auth = true`). A flag given wins, then its environment
    /// variable, then the file, then the default.
    #[arg(long, value_name = "PATH", env = "WAYMARK_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// Print the effective settings (as a --config file, secrets masked, each with where it came
    /// from) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Apply no migrations at start (for a database role without DDL rights): start only if
    /// `waymark migrate` has brought the schema up to this build's, else exit saying so.
    #[arg(long, env = "WAYMARK_NO_MIGRATE", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_migrate: bool,
    /// Address to listen on.
    #[arg(long, default_value = DEFAULT_LISTEN, env = "WAYMARK_LISTEN")]
    pub listen: String,
    /// `sqlite:<path>` (embedded, the default) or `postgres://user@host:port/db`.
    #[arg(long, default_value = DEFAULT_DATABASE_URL, env = "WAYMARK_DATABASE_URL")]
    pub database_url: String,
    /// Do not use PostgreSQL LISTEN/NOTIFY between replicas (for PostgreSQL-compatible databases
    /// without it): replicas then find each other's changes by polling, every
    /// --dispatch-poll-interval.
    #[arg(long, env = "WAYMARK_NO_NOTIFY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_notify: bool,
    /// A worker silent for this long loses its workflows.
    #[arg(long, default_value = "15s", value_parser = parse_duration, env = "WAYMARK_WORKER_LEASE")]
    pub worker_lease: std::time::Duration,
    /// Interval at which workers are asked to heartbeat.
    #[arg(long, default_value = "3s", value_parser = parse_duration, env = "WAYMARK_HEARTBEAT_INTERVAL")]
    pub heartbeat_interval: std::time::Duration,
    /// How long a disconnected worker's workflows wait for it before going back to their queue.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "WAYMARK_RECOVERY_GRACE")]
    pub recovery_grace: std::time::Duration,
    /// How often to look for workers whose lease ended.
    #[arg(long, default_value = "1s", value_parser = parse_duration, env = "WAYMARK_RECOVERY_INTERVAL")]
    pub recovery_interval: std::time::Duration,
    /// Recoveries after which a workflow is dead-lettered (MAX_RECOVERY_ATTEMPTS_EXCEEDED).
    #[arg(long, default_value_t = 100, env = "WAYMARK_MAX_RECOVERY_ATTEMPTS")]
    pub max_recovery_attempts: u32,
    /// How often to look for work enqueued through other replicas.
    #[arg(long, default_value = "500ms", value_parser = parse_duration, env = "WAYMARK_DISPATCH_POLL_INTERVAL")]
    pub dispatch_poll_interval: std::time::Duration,
    /// How often the database is pinged for health (`/readyz`, the gRPC health service, and
    /// pausing recovery while it is away); every tenth ping also checks that the database has
    /// every migration this build needs.
    #[arg(long, default_value = "1s", value_parser = parse_period, env = "WAYMARK_HEALTH_INTERVAL")]
    pub health_interval: std::time::Duration,
    /// Largest JSON payload accepted, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024, env = "WAYMARK_MAX_PAYLOAD_BYTES")]
    pub max_payload_bytes: usize,
    /// Most worker streams this server holds at once; more are refused (RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = 10_000, env = "WAYMARK_MAX_WORKER_STREAMS")]
    pub max_worker_streams: usize,
    /// Most requests one worker stream may have in flight; beyond it the stream is not read
    /// until one finishes (backpressure).
    #[arg(long, default_value_t = 1_024, value_parser = clap::value_parser!(u32).range(1..), env = "WAYMARK_MAX_REQUESTS_PER_STREAM")]
    pub max_requests_per_stream: u32,
    /// Most bytes of history (input and recorded steps, as JSON) a dispatch carries; a workflow
    /// past it fails with HISTORY_TOO_LARGE when it would be dispatched again.
    #[arg(long, default_value_t = 32 * 1024 * 1024, env = "WAYMARK_MAX_HISTORY_BYTES")]
    pub max_history_bytes: usize,
    /// Most client calls waiting at once (AwaitWorkflow, GetEvent with a timeout, ReadStream);
    /// more are refused with RESOURCE_EXHAUSTED TOO_MANY_WAITS.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..), env = "WAYMARK_MAX_WAITS")]
    pub max_waits: u32,
    /// Most unread messages one workflow's inbox holds; a send past it is refused with
    /// RESOURCE_EXHAUSTED INBOX_FULL.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..), env = "WAYMARK_MAX_UNREAD_MESSAGES")]
    pub max_unread_messages: u32,
    /// How long a call that does not wait may take before the server answers DEADLINE_EXCEEDED;
    /// calls that wait (AwaitWorkflow, GetEvent) get it on top of their wait.
    #[arg(long, default_value = "60s", value_parser = parse_duration, env = "WAYMARK_REQUEST_TIMEOUT")]
    pub request_timeout: std::time::Duration,
    /// Delete finished workflows (and everything recorded for them) this long after they
    /// finished, e.g. 30d; `--retention-rule` sets times for some of them. Without it (and
    /// without rules) nothing is ever deleted.
    #[arg(long, value_parser = parse_duration, env = "WAYMARK_RETENTION")]
    pub retention: Option<std::time::Duration>,
    /// A retention time for some finished workflows: `SELECTORS=DURATION|forever`, selectors
    /// `namespace:NAME`, `queue:NAME`, `status:STATUS` joined by commas, e.g.
    /// `queue:payments,status:ERROR=90d`. Repeatable; the first rule that covers a workflow
    /// decides, `--retention` takes the rest.
    #[arg(long = "retention-rule", value_parser = waymark_server::engine::retention::parse_rule, env = "WAYMARK_RETENTION_RULE", value_delimiter = ';')]
    pub retention_rules: Vec<waymark_server::engine::retention::RetentionRule>,
    /// Most finished workflows the retention collector deletes per second on this replica. It
    /// goes slower when its batches take longer (a busy database): it spends at most a quarter
    /// of the time in them.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..), env = "WAYMARK_RETENTION_RATE")]
    pub retention_rate: u32,
    /// Log format: text or json.
    #[arg(long, default_value = "text", value_parser = ["text", "json"], env = "WAYMARK_LOG_FORMAT")]
    pub log_format: String,
    /// Which calls leave an `info` log line when answered (method, status, latency, peer, trace
    /// and workflow ids): `all`, `errors` (those answered with a status other than OK) or
    /// `off`. Every call is counted in the metrics either way.
    #[arg(long, value_name = "WHICH", default_value = "errors", env = "WAYMARK_ACCESS_LOG", value_parser = AccessLog::parse)]
    pub access_log: AccessLog,
    /// Export spans over OTLP/gRPC to this collector (`http://127.0.0.1:4317`); none exported
    /// without it.
    #[arg(long, value_name = "URL", env = "WAYMARK_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Serve Prometheus metrics (`/metrics`) and health for orchestrators (`/healthz`,
    /// `/readyz`) over HTTP on this address; off without it.
    #[arg(long, value_name = "ADDR", env = "WAYMARK_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Require an API key on every call (`authorization: Bearer <key>`); see `waymark key`.
    #[arg(long, env = "WAYMARK_AUTH", value_parser = clap::builder::BoolishValueParser::new())]
    pub auth: bool,
    /// At start, if PATH does not exist, create an admin API key and write it there (mode
    /// 0600): the first key, from which `waymark key create` makes the others.
    #[arg(long, value_name = "PATH", env = "WAYMARK_INIT_ADMIN_KEY_FILE")]
    pub init_admin_key_file: Option<std::path::PathBuf>,
    /// At start, register the admin key whose text this file holds (made by `waymark key
    /// generate` and kept in a secret store, e.g. a Kubernetes Secret), unless it is known
    /// already. A revoked one stays revoked.
    #[arg(long, value_name = "PATH", env = "WAYMARK_ADMIN_KEY_FILE")]
    pub admin_key_file: Option<std::path::PathBuf>,
    /// How long a verified key is trusted before it is read again: the longest a revocation
    /// made on another replica takes to apply here.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "WAYMARK_KEY_CACHE_TTL")]
    pub key_cache_ttl: std::time::Duration,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "PATH", requires = "tls_key", env = "WAYMARK_SERVER_TLS_CERT")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert", env = "WAYMARK_SERVER_TLS_KEY")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS. Needs --tls-cert.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_cert",
        env = "WAYMARK_SERVER_TLS_CLIENT_CA"
    )]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// A connection that has not finished its TLS handshake within this is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "WAYMARK_TLS_HANDSHAKE_TIMEOUT")]
    pub tls_handshake_timeout: std::time::Duration,
    /// Allow listening on a non-loopback address without authentication or without TLS.
    #[arg(long, env = "WAYMARK_SERVER_INSECURE", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure: bool,
    /// Most namespaces, `default` included. Each open namespace has its own engine and, on
    /// PostgreSQL, a pool of --db-namespace-pool-size connections.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000), env = "WAYMARK_MAX_NAMESPACES")]
    pub max_namespaces: u32,
    /// PostgreSQL: most connections of the default namespace's pool (the one the server's own
    /// work and most tenants use). TLS to the database is asked for in --database-url
    /// (`?sslmode=require`, or `verify-full&sslrootcert=ca.pem`).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1_000), env = "WAYMARK_DB_POOL_SIZE")]
    pub db_pool_size: u32,
    /// PostgreSQL: most connections of each other namespace's pool.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1_000), env = "WAYMARK_DB_NAMESPACE_POOL_SIZE")]
    pub db_namespace_pool_size: u32,
    /// Serve the web console on this address, or `off`. By default on loopback, one port above
    /// --listen (127.0.0.1:7451), or a free port when that one is taken; the start-up log and
    /// `waymark workflow get` print its address. Beyond loopback it needs --auth and TLS, as
    /// --listen does.
    #[arg(long, value_name = "ADDR|off", value_parser = waymark_server::console::ConsoleListen::parse,
        env = "WAYMARK_CONSOLE_LISTEN")]
    pub console_listen: Option<waymark_server::console::ConsoleListen>,
    /// The console offers no write action, whatever the key: calls through its port that would
    /// change anything are refused (CONSOLE_READ_ONLY).
    #[arg(long, env = "WAYMARK_CONSOLE_READ_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub console_read_only: bool,
}

impl ServerArgs {
    /// How the replica logs and exports spans.
    pub fn telemetry(&self) -> waymark_server::telemetry::TelemetryOptions {
        waymark_server::telemetry::TelemetryOptions {
            log_json: self.log_format == "json",
            // The variable OpenTelemetry's exporters read, when ours is not set.
            otlp_endpoint: self.otlp_endpoint.clone().or_else(|| {
                std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .ok()
                    .filter(|e| !e.is_empty())
            }),
            service_name: "waymark".into(),
            store_call_metrics: self.metrics_listen.is_some(),
        }
    }

    pub fn options(&self) -> ServerOptions {
        ServerOptions {
            listen: self.listen.clone(),
            metrics_listen: self.metrics_listen.clone(),
            access_log: self.access_log,
            database_url: self.database_url.clone(),
            notify: !self.no_notify,
            security: waymark_server::server::SecurityOptions {
                auth: self.auth,
                init_admin_key_file: self.init_admin_key_file.clone(),
                admin_key_file: self.admin_key_file.clone(),
                key_cache_ttl: self.key_cache_ttl,
                tls_cert: self.tls_cert.clone(),
                tls_key: self.tls_key.clone(),
                tls_client_ca: self.tls_client_ca.clone(),
                tls_handshake_timeout: self.tls_handshake_timeout,
                insecure: self.insecure,
            },
            max_namespaces: self.max_namespaces as usize,
            db_pool_size: self.db_pool_size,
            db_namespace_pool_size: self.db_namespace_pool_size,
            console: waymark_server::console::ConsoleOptions {
                listen: self.console_listen.clone().unwrap_or_default(),
                read_only: self.console_read_only,
            },
            schema: if self.no_migrate {
                waymark_store::SchemaPolicy::Expect
            } else {
                waymark_store::SchemaPolicy::Migrate
            },
            engine: waymark_server::engine::EngineConfig {
                worker_lease: self.worker_lease,
                heartbeat_interval: self.heartbeat_interval,
                recovery_grace: self.recovery_grace,
                recovery_interval: self.recovery_interval,
                max_recovery_attempts: self.max_recovery_attempts,
                dispatch_poll_interval: self.dispatch_poll_interval,
                health_interval: self.health_interval,
                max_payload_bytes: self.max_payload_bytes,
                max_worker_streams: self.max_worker_streams,
                max_requests_per_stream: self.max_requests_per_stream as usize,
                max_history_bytes: self.max_history_bytes,
                max_waits: self.max_waits as usize,
                max_unread_messages: self.max_unread_messages,
                request_timeout: self.request_timeout,
                retention: waymark_server::engine::retention::Retention {
                    rules: self.retention_rules.clone(),
                    default_keep: self.retention,
                    rate: self.retention_rate,
                },
                ..Default::default()
            },
        }
    }
}

/// Options every client command takes. Those not given come from the environment
/// (`WAYMARK_SERVER`, `WAYMARK_API_KEY`, `WAYMARK_TLS_CA`, `WAYMARK_TLS_CERT`, `WAYMARK_TLS_KEY`,
/// `WAYMARK_NAMESPACE`).
#[derive(Args, Debug, Clone, Default)]
pub struct ClientArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Namespace to act in; else `WAYMARK_NAMESPACE`, else default.
    #[arg(long, global = true)]
    pub namespace: Option<String>,
}

/// Where the server is and how to prove who we are.
#[derive(Args, Clone, Default)]
pub struct ConnectionArgs {
    /// Server address (https://… for TLS); `WAYMARK_SERVER` or http://127.0.0.1:7450 when not given.
    #[arg(long, global = true)]
    pub server: Option<String>,
    /// API key to send (`authorization: Bearer …`); else `WAYMARK_API_KEY`.
    #[arg(long, global = true)]
    pub api_key: Option<String>,
    /// CA certificate (PEM file) that signs the server's; else `WAYMARK_TLS_CA`.
    #[arg(long, global = true, value_name = "PATH")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM file) for mutual TLS; else `WAYMARK_TLS_CERT`.
    #[arg(long, global = true, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// Its private key (PEM file); else `WAYMARK_TLS_KEY`.
    #[arg(long, global = true, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Send the API key even over plaintext (http://) to a host that is not loopback, which is
    /// refused otherwise; else `WAYMARK_INSECURE=1`.
    #[arg(long, global = true)]
    pub insecure: bool,
}

// By hand, so the API key never reaches a log or an error through `{:?}`.
impl std::fmt::Debug for ConnectionArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionArgs")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl ConnectionArgs {
    /// The connection these options (and the environment) describe.
    pub fn options(&self) -> anyhow::Result<waymark_sdk::ConnectOptions> {
        let read =
            |p: &std::path::PathBuf| std::fs::read(p).map_err(|e| invalid(format!("cannot read {}: {e}", p.display())));
        let mut o = waymark_sdk::ConnectOptions::from_env();
        if let Some(s) = &self.server {
            o = o.server(s);
        }
        if let Some(k) = &self.api_key {
            o = o.api_key(k);
        }
        if let Some(ca) = &self.tls_ca {
            o = o.tls_ca_pem(read(ca)?);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            o = o.client_identity_pem(read(cert)?, read(key)?);
        }
        if self.insecure {
            o = o.insecure(true);
        }
        Ok(o)
    }

    pub async fn connect(&self) -> anyhow::Result<waymark_sdk::Client> {
        Ok(waymark_sdk::Client::connect_with(&self.options()?).await?)
    }
}

impl ClientArgs {
    pub async fn connect(&self) -> anyhow::Result<waymark_sdk::Client> {
        let mut o = self.connection.options()?;
        if let Some(n) = &self.namespace {
            o = o.namespace(n);
        }
        Ok(waymark_sdk::Client::connect_with(&o).await?)
    }
}

/// Runs a client command and returns the process exit code.
pub async fn run_client(cmd: Command) -> i32 {
    let result = match cmd {
        Command::Workflow(cmd) => workflow::run(cmd).await,
        Command::Queue(cmd) => queue::run(cmd).await,
        Command::Schedule(cmd) => schedule::run(cmd).await,
        Command::Key(cmd) => key::run(cmd).await,
        Command::Namespace(cmd) => namespace::run(cmd).await,
        Command::Worker(cmd) => worker::run(cmd).await,
        Command::Backup(args) => backup::run(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Health(args) => health::run(args).await,
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "waymark", &mut std::io::stdout());
            Ok(0)
        }
        Command::Server(_) => Err(anyhow::anyhow!("`server` is not a client command")),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let code = exit_code(&e);
            // Programs that asked for JSON get their errors as JSON too (on standard error).
            if std::env::args().any(|a| a == "--json") {
                let reason = e.downcast_ref::<waymark_sdk::Error>().and_then(|e| e.reason());
                let error = serde_json::json!({
                    "error": { "message": e.to_string(), "reason": reason, "exit_code": code }
                });
                eprintln!("{error}");
            } else {
                eprintln!("error: {e}");
            }
            code
        }
    }
}

/// Asks before something that cannot be undone: `yes` (`--yes`) goes ahead; on a terminal the
/// user is asked; anywhere else (a script, a pipe) it is refused, so nothing is destroyed by a
/// command that nobody confirmed. Ok(false): the user said no.
pub fn confirm(yes: bool, what: &str) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(true);
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(anyhow::Error::new(Usage(format!(
            "this would {what}; pass --yes to confirm (standard input is not a terminal to ask on)"
        ))));
    }
    eprint!("This will {what}. Go ahead? [y/N] ");
    std::io::stderr().flush().ok();
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// A command line that cannot be carried out as given (exit code 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The text of `--input-file FILE` (`-`: standard input).
pub fn read_input(file: &std::path::Path) -> anyhow::Result<String> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| invalid(format!("cannot read standard input: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(file).map_err(|e| invalid(format!("cannot read {}: {e}", file.display())))
}

/// Input the command line itself refused (not valid JSON, an unknown status): exit code 6.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

pub fn invalid(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InvalidInput(message.into()))
}

/// The documented exit code for a failed request (see the module docs).
pub fn exit_code(e: &anyhow::Error) -> i32 {
    use tonic::Code;
    if e.downcast_ref::<InvalidInput>().is_some() {
        return EXIT_INVALID;
    }
    if e.downcast_ref::<Usage>().is_some() {
        return 2;
    }
    match e.downcast_ref::<waymark_sdk::Error>() {
        Some(waymark_sdk::Error::Transport(_)) => EXIT_UNAVAILABLE,
        Some(rpc @ waymark_sdk::Error::Rpc { .. }) => match rpc.code() {
            Some(Code::NotFound) => EXIT_NOT_FOUND,
            Some(Code::InvalidArgument | Code::OutOfRange) => EXIT_INVALID,
            Some(Code::Unavailable | Code::DeadlineExceeded) => EXIT_UNAVAILABLE,
            Some(Code::Unauthenticated | Code::PermissionDenied) => EXIT_DENIED,
            _ => 1,
        },
        _ => 1,
    }
}

pub const EXIT_NOT_FOUND: i32 = 5;
pub const EXIT_INVALID: i32 = 6;
pub const EXIT_UNAVAILABLE: i32 = 7;
pub const EXIT_DENIED: i32 = 8;

/// A `--tag KEY=VALUE` argument (the server checks the key's and value's bounds).
pub fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// The period of a loop the server runs (a duration above zero: a zero would make it spin).
pub fn parse_period(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} is no period: it must be above zero"));
    }
    Ok(d)
}
