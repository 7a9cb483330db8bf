//! Where `waymark server`'s settings come from: a flag, else its `WAYMARK_…` environment
//! variable (clap reads those; `--help` names each), else the TOML file `--config` names, else
//! the default. The file's keys are the flags' long names, so anything in `--help` can move
//! into it unchanged; `--print-config` shows the result as such a file, secrets masked.
//!
//! The file is applied by parsing twice: the first parse finds `--config` and which settings
//! no flag or variable gave; those are put before the command line's own arguments, as flags,
//! and everything is parsed again — so the file's values meet the same checks a flag does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};

use super::{Cli, Command, ServerArgs};

/// The server's command line as parsed, and how each setting was arrived at.
pub struct Settings {
    matches: ArgMatches,
    /// The ids of the settings the file gave, and the file.
    from_file: Vec<String>,
    file: Option<PathBuf>,
}

/// A parsed command line: the server with its settings, or a client command.
pub enum Parsed {
    Server(Box<ServerArgs>, Settings),
    Client(Box<Command>),
}

/// Settings that are about this run, not the server's configuration.
const NOT_SETTINGS: [&str; 4] = ["config", "print_config", "help", "version"];

/// Parses `argv` (the program's arguments, its name first). A bad command line or file is a
/// usage error: clap's own for flags, ours for the file (exit code 2).
pub fn parse(argv: Vec<OsString>) -> Result<Parsed, clap::Error> {
    let first = Cli::command().try_get_matches_from(&argv)?;
    let Some(("server", server)) = first.subcommand() else {
        return Ok(Parsed::Client(Box::new(Cli::from_arg_matches(&first)?.command)));
    };
    let mut argv = argv;
    let mut from_file = Vec::new();
    let file = server.get_one::<PathBuf>("config").cloned();
    if let Some(path) = &file {
        let (flags, ids) = file_flags(path, server).map_err(usage)?;
        // Just after `server`: the command line's own flags come later and would win anyway.
        let at = argv.iter().position(|a| a == "server").map_or(argv.len(), |i| i + 1);
        argv.splice(at..at, flags);
        from_file = ids;
    }
    let matches = Cli::command().try_get_matches_from(&argv)?;
    let Some(("server", server)) = matches.subcommand() else {
        unreachable!("parsed as the server's command line once already");
    };
    let args = ServerArgs::from_arg_matches(server)?;
    let settings = Settings {
        matches: server.clone(),
        from_file,
        file,
    };
    Ok(Parsed::Server(Box::new(args), settings))
}

fn usage(message: String) -> clap::Error {
    Cli::command().error(clap::error::ErrorKind::InvalidValue, message)
}

/// The file's settings that no flag or variable gave, as flags; and their ids.
fn file_flags(path: &Path, given: &ArgMatches) -> Result<(Vec<OsString>, Vec<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{}: {e}", path.display()))?;
    let server = Cli::command();
    let server = server.find_subcommand("server").expect("the server command");
    let (mut flags, mut ids) = (Vec::new(), Vec::new());
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let arg = server
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()) && !NOT_SETTINGS.contains(&a.get_id().as_str()))
            .ok_or_else(|| {
                format!(
                    "{}: unknown setting `{key}` (the settings are the long names of `waymark server \
                     --help`'s flags, e.g. worker-lease)",
                    path.display()
                )
            })?;
        let id = arg.get_id().as_str();
        if !matches!(given.value_source(id), None | Some(ValueSource::DefaultValue)) {
            continue;
        }
        let flag = format!("--{long}");
        let one = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(n) => Ok(n.to_string()),
                toml::Value::Float(n) => Ok(n.to_string()),
                toml::Value::Boolean(b) => Ok(b.to_string()),
                _ => Err(format!(
                    "{}: `{key}` takes a string, a number or true/false",
                    path.display()
                )),
            }
        };
        match (value, arg.get_action()) {
            (toml::Value::Boolean(on), ArgAction::SetTrue) => {
                if *on {
                    flags.push(flag.into());
                }
            }
            (_, ArgAction::SetTrue) => return Err(format!("{}: `{key}` is true or false", path.display())),
            (toml::Value::Array(items), ArgAction::Append) => {
                for item in items {
                    flags.extend([flag.clone().into(), one(item)?.into()]);
                }
            }
            (toml::Value::Array(_), _) => return Err(format!("{}: `{key}` takes one value", path.display())),
            (v, _) => flags.extend([flag.into(), one(v)?.into()]),
        }
        ids.push(id.to_string());
    }
    Ok((flags, ids))
}

impl Settings {
    /// `--print-config`: show the settings instead of serving.
    pub fn print_only(&self) -> bool {
        self.matches.get_flag("print_config")
    }

    /// The effective settings as a `--config` file: every setting, in `--help`'s order, with
    /// where it came from; unset ones commented out; passwords in URLs masked.
    pub fn render(&self) -> String {
        let cli = Cli::command();
        let server = cli.find_subcommand("server").expect("the server command");
        let mut out = String::from(
            "# waymark server's effective settings: a flag wins, then its environment variable, \
             then the --config file, then the default.\n",
        );
        for arg in server.get_arguments() {
            let id = arg.get_id().as_str();
            let Some(long) = arg.get_long() else { continue };
            if NOT_SETTINGS.contains(&id) {
                continue;
            }
            let raw: Vec<String> = self
                .matches
                .get_raw(id)
                .map(|values| values.map(|v| mask(&v.to_string_lossy())).collect())
                .unwrap_or_default();
            let source = match self.matches.value_source(id) {
                Some(ValueSource::CommandLine) if self.from_file.iter().any(|f| f == id) => {
                    let file = self.file.as_deref().unwrap_or(Path::new("?"));
                    format!("file {}", file.display())
                }
                Some(ValueSource::CommandLine) => "flag".into(),
                Some(ValueSource::EnvVariable) => {
                    format!("env {}", arg.get_env().map(|e| e.to_string_lossy()).unwrap_or_default())
                }
                Some(ValueSource::DefaultValue) => "default".into(),
                _ => String::new(),
            };
            let flag = self.matches.try_get_one::<bool>(id).ok().flatten();
            let value = match arg.get_action() {
                _ if flag.is_some() => flag.map(bool::to_string),
                ArgAction::Append if !raw.is_empty() => Some(format!(
                    "[{}]",
                    raw.iter().map(|v| quoted(v)).collect::<Vec<_>>().join(", ")
                )),
                _ => raw.first().map(|v| typed(v)),
            };
            match value {
                Some(v) if !source.is_empty() => out.push_str(&format!("{long} = {v}  # {source}\n")),
                Some(v) => out.push_str(&format!("{long} = {v}\n")),
                None => out.push_str(&format!("# {long} = (not set)\n")),
            }
        }
        out
    }
}

/// A value as TOML: numbers and true/false bare, anything else a string.
fn typed(v: &str) -> String {
    if v == "true" || v == "false" || (v.parse::<u64>().is_ok() && !v.starts_with('0')) || v == "0" {
        v.to_string()
    } else {
        quoted(v)
    }
}

fn quoted(v: &str) -> String {
    toml::Value::String(v.to_string()).to_string()
}

/// `v` with the password of any URL in it masked: `postgres://user:****@host/db`, and
/// `password=****` in a query.
pub fn mask(v: &str) -> String {
    let Some(scheme_end) = v.find("://") else {
        return v.to_string();
    };
    let rest_at = scheme_end + 3;
    let authority_end = v[rest_at..].find(['/', '?', '#']).map_or(v.len(), |i| rest_at + i);
    let authority = &v[rest_at..authority_end];
    let mut out = v[..rest_at].to_string();
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            match userinfo.find(':') {
                Some(colon) => out.push_str(&format!("{}:****", &userinfo[..colon])),
                None => out.push_str(userinfo),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &v[authority_end..];
    match tail.find('?') {
        Some(q) => {
            out.push_str(&tail[..=q]);
            let params: Vec<String> = tail[q + 1..]
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.to_ascii_lowercase().contains("password") => format!("{k}=****"),
                    _ => p.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use waymark_server::api::observe::AccessLog;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("waymark")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn server(args: &[&str]) -> (ServerArgs, Settings) {
        match parse(argv(args)) {
            Ok(Parsed::Server(args, settings)) => (*args, settings),
            Ok(Parsed::Client(_)) => panic!("a client command"),
            Err(e) => panic!("{e}"),
        }
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(
            mask("postgres://waymark:s3cret@db:5432/app?sslmode=require&password=x"),
            "postgres://waymark:****@db:5432/app?sslmode=require&password=****"
        );
        assert_eq!(mask("postgres://waymark@db/app"), "postgres://waymark@db/app");
        assert_eq!(mask("sqlite:.waymark/waymark.db"), "sqlite:.waymark/waymark.db");
        assert_eq!(mask("http://u:p@collector:4317"), "http://u:****@collector:4317");
    }

    #[test]
    fn every_server_flag_has_a_waymark_variable() {
        let cli = Cli::command();
        let server = cli.find_subcommand("server").unwrap();
        let mut seen = std::collections::HashSet::new();
        for arg in server.get_arguments() {
            let id = arg.get_id().as_str();
            if ["print_config", "help", "version"].contains(&id) {
                continue;
            }
            let env = arg.get_env().map(|e| e.to_string_lossy().to_string());
            let env = env.unwrap_or_else(|| panic!("--{} has no environment variable", id));
            assert!(env.starts_with("WAYMARK_"), "--{id}: {env}");
            assert!(seen.insert(env.clone()), "{env} is used twice");
        }
        // The client's variables mean other things: a server must not pick them up.
        for client in [
            "WAYMARK_SERVER",
            "WAYMARK_API_KEY",
            "WAYMARK_TLS_CA",
            "WAYMARK_TLS_CERT",
            "WAYMARK_TLS_KEY",
            "WAYMARK_NAMESPACE",
            "WAYMARK_INSECURE",
        ] {
            assert!(!seen.contains(client), "{client} is a client's variable");
        }
    }

    #[test]
    fn the_file_fills_in_what_no_flag_gave_and_flags_win() {
        let f = file(
            "worker-lease = \"1h30m\"\nmax_waits = 7\nauth = true\naccess-log = false\n\
             retention-rule = [\"queue:a=1d\", \"status:ERROR=forever\"]\nlisten = \"127.0.0.1:9\"\n",
        );
        let path = f.path().to_str().unwrap();
        let (args, settings) = server(&["server", "--config", path, "--listen", "127.0.0.1:1"]);
        assert_eq!(args.worker_lease, std::time::Duration::from_secs(5400));
        assert_eq!(args.max_waits, 7);
        assert!(args.auth && args.access_log == AccessLog::Off);
        assert_eq!(args.retention_rules.len(), 2);
        assert_eq!(args.listen, "127.0.0.1:1", "the flag wins over the file");
        let shown = settings.render();
        assert!(shown.contains("listen = \"127.0.0.1:1\"  # flag"), "{shown}");
        assert!(
            shown.contains(&format!("worker-lease = \"1h30m\"  # file {path}")),
            "{shown}"
        );
        assert!(shown.contains("max-waits = 7  # file"), "{shown}");
        assert!(shown.contains("heartbeat-interval = \"3s\"  # default"), "{shown}");
        assert!(shown.contains("# retention = (not set)"), "{shown}");

        // What it prints is itself a config file that gives the same settings.
        let again = file(&shown);
        let (args2, _) = server(&["server", "--config", again.path().to_str().unwrap()]);
        assert_eq!(
            format!("{:?}", args2.retention_rules),
            format!("{:?}", args.retention_rules)
        );
        assert_eq!(
            (args2.listen.as_str(), args2.worker_lease, args2.max_waits),
            ("127.0.0.1:1", args.worker_lease, 7)
        );
        assert!(args2.auth && args2.access_log == AccessLog::Off);
    }

    #[test]
    fn a_bad_file_is_a_usage_error_naming_the_setting() {
        for (text, says) in [
            ("no-such-thing = 1\n", "unknown setting `no-such-thing`"),
            ("auth = \"yes\"\n", "`auth` is true or false"),
            ("worker-lease = \"soon\"\n", "soon"),
            ("listen = [\"a\", \"b\"]\n", "`listen` takes one value"),
            ("listen = \n", "listen"),
        ] {
            let f = file(text);
            let e = match parse(argv(&["server", "--config", f.path().to_str().unwrap()])) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{text:?} was accepted"),
            };
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let e = parse(argv(&["server", "--config", "/no/such/file.toml"]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cannot read /no/such/file.toml"), "{e}");
    }

    #[test]
    fn durations_take_compound_forms() {
        let (args, _) = server(&["server", "--worker-lease", "1h30m", "--recovery-grace", "2m 5s"]);
        assert_eq!(args.worker_lease, std::time::Duration::from_secs(5400));
        assert_eq!(args.recovery_grace, std::time::Duration::from_secs(125));
    }

    #[test]
    fn a_loop_period_must_be_above_zero() {
        let (args, _) = server(&["server", "--health-interval", "100ms"]);
        assert_eq!(args.health_interval, std::time::Duration::from_millis(100));
        let (args, _) = server(&["server"]);
        assert_eq!(args.health_interval, std::time::Duration::from_secs(1), "the default");
        for zero in ["0s", "0ms", "0"] {
            let e = parse(argv(&["server", "--health-interval", zero]))
                .err()
                .expect(zero)
                .to_string();
            assert!(e.contains("must be above zero"), "{zero}: {e}");
        }
    }
}
