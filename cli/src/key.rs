//! `waymark key …`: API keys from a shell. `create` prints the key alone on its first line (the
//! only time it is shown), so `KEY=$(waymark key create --role worker)` works.

use clap::Subcommand;
use waymark_sdk::{ApiKeyInfo, ApiKeySpec, Role};

use super::{output, ConnectionArgs};
use waymark_server::duration::parse_duration;

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Create a key and print it (shown only now).
    Create {
        /// reader, client, worker or admin.
        #[arg(long)]
        role: Role,
        /// A label for people.
        #[arg(long, default_value = "")]
        name: String,
        /// A namespace the key may act in (repeatable; `*` for all, which only a `*` admin key
        /// may grant). Required for an admin key. Default: the one namespace of the key that
        /// makes it, else default.
        #[arg(long = "namespace", required_if_eq("role", "admin"))]
        namespaces: Vec<String>,
        /// For a worker key: a workflow, step or queue name it may register and reach, or a
        /// prefix ending in `*` (repeatable). Default: any name in its namespaces.
        #[arg(long = "pattern")]
        patterns: Vec<String>,
        /// The key stops working after this long (e.g. 30m, 12h).
        #[arg(long, value_parser = parse_duration)]
        expires: Option<std::time::Duration>,
        /// Write the key straight into this database instead of asking a server (to make the
        /// first admin key).
        #[arg(long)]
        database_url: Option<String>,
        #[command(flatten)]
        connection: ConnectionArgs,
        /// Print JSON (the key's facts and its text as `secret`).
        #[arg(long)]
        json: bool,
    },
    /// Print a new key's text without registering it anywhere: for a secret store, and a
    /// server started with --admin-key-file that registers it as an admin key.
    Generate,
    /// List keys, newest first (never their secrets).
    List {
        #[command(flatten)]
        connection: ConnectionArgs,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by its id: calls with it are refused, and worker streams opened with it are
    /// closed, within seconds on every replica.
    Revoke {
        key_id: String,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
}

fn print_keys(keys: &[ApiKeyInfo]) {
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            vec![
                k.key_id.clone(),
                k.role.map_or("?".into(), |r| format!("{r:?}").to_lowercase()),
                k.namespaces.join(","),
                if k.name_patterns.is_empty() {
                    "*".into()
                } else {
                    k.name_patterns.join(",")
                },
                output::time(k.created_at_ms),
                k.expires_at_ms.map_or("-".into(), output::time),
                k.revoked_at_ms.map_or("-".into(), output::time),
                k.name.clone(),
            ]
        })
        .collect();
    output::table(
        &[
            "KEY ID",
            "ROLE",
            "NAMESPACES",
            "NAMES",
            "CREATED",
            "EXPIRES",
            "REVOKED",
            "NAME",
        ],
        &rows,
    );
}

/// Creates the key in the database itself, as a server would (no server needed).
async fn create_in_database(url: &str, spec: ApiKeySpec) -> anyhow::Result<(ApiKeyInfo, String)> {
    use waymark_server::auth::{Authenticator, KeySpec};
    let store = waymark_server::server::open_store(url, false).await?;
    let clock: std::sync::Arc<dyn waymark_server::engine::Clock> =
        std::sync::Arc::new(waymark_server::engine::SystemClock);
    let auth = Authenticator::new(true, store, clock, std::time::Duration::ZERO);
    let role = match spec.role {
        Role::Reader => waymark_server::auth::Role::Reader,
        Role::Client => waymark_server::auth::Role::Client,
        Role::Worker => waymark_server::auth::Role::Worker,
        Role::Admin => waymark_server::auth::Role::Admin,
    };
    let created = auth
        .create_key(
            None,
            KeySpec {
                name: spec.name,
                role,
                namespaces: spec.namespaces,
                name_patterns: spec.name_patterns,
                expires_at: spec.expires_at_ms,
            },
        )
        .await?;
    let r = created.record;
    let info = ApiKeyInfo {
        key_id: r.key_id,
        name: r.name,
        role: Some(spec.role),
        namespaces: r.namespaces,
        name_patterns: r.name_patterns,
        created_at_ms: r.created_at,
        expires_at_ms: r.expires_at,
        revoked_at_ms: None,
    };
    Ok((info, created.text))
}

pub async fn run(cmd: KeyCommand) -> anyhow::Result<i32> {
    match cmd {
        KeyCommand::Create {
            role,
            name,
            namespaces,
            patterns,
            expires,
            database_url,
            connection,
            json,
        } => {
            let spec = ApiKeySpec {
                name,
                role,
                namespaces,
                name_patterns: patterns,
                expires_at_ms: expires.map(|d| {
                    waymark_server::engine::Clock::now(&waymark_server::engine::SystemClock) + d.as_millis() as i64
                }),
            };
            let (info, text) = match database_url {
                Some(url) => create_in_database(&url, spec).await?,
                None => connection.connect().await?.create_api_key(&spec).await?,
            };
            if json {
                let mut v = serde_json::to_value(&info).expect("serializes");
                v["secret"] = serde_json::Value::String(text);
                println!("{}", serde_json::to_string_pretty(&v).expect("serializes"));
            } else {
                println!("{text}");
                eprintln!(
                    "created {} key {} (shown once: keep it somewhere safe)",
                    format!("{role:?}").to_lowercase(),
                    info.key_id
                );
            }
        }
        KeyCommand::Generate => {
            println!("{}", waymark_server::auth::key::generate().text);
        }
        KeyCommand::List { connection, json } => {
            let keys = connection.connect().await?.list_api_keys().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&keys).expect("serializes"));
            } else {
                print_keys(&keys);
            }
        }
        KeyCommand::Revoke { key_id, connection } => {
            let revoked = connection.connect().await?.revoke_api_key(&key_id).await?;
            if !revoked {
                eprintln!("key {key_id} was already revoked");
            }
        }
    }
    Ok(0)
}
