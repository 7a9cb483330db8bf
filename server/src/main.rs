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
        cmd => run_client(cmd).await,
    };
    std::process::exit(code);
}
