//! `waymark`: the server (`waymark server`) and the command line (`waymark workflow …`).

use clap::Parser;
use tracing_subscriber::EnvFilter;
use waymark_server::cli::{run_client, Cli, Command};

fn init_logging(json: bool) {
    let filter = EnvFilter::try_from_env("WAYMARK_LOG").unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// The command line ends quietly when its reader goes away (`waymark workflow list | head -1`),
/// as command-line tools do: Rust ignores SIGPIPE, which turns every later print into a panic.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: resetting one signal's disposition to the default before any other thread prints;
    // no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Server(args) => {
            init_logging(args.log_format == "json");
            match waymark_server::server::run(args.options()).await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            }
        }
        cmd => {
            restore_sigpipe();
            run_client(cmd).await
        }
    };
    std::process::exit(code);
}
