//! `waymark`: the server (`waymark server`) and the command line (`waymark workflow …`).

use waymark_cli::run_client;
use waymark_cli::settings::{self, Parsed};

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

fn main() {
    waymark_server::allocator::limit_arenas();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the async runtime starts");
    let code = runtime.block_on(run());
    std::process::exit(code);
}

async fn run() -> i32 {
    let parsed = match settings::parse(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(e) => e.exit(),
    };
    let code = match parsed {
        Parsed::Server(_, settings) if settings.print_only() => {
            print!("{}", settings.render());
            0
        }
        Parsed::Server(args, _) => {
            waymark_server::allocator::spawn_trimmer();
            let telemetry = match waymark_server::telemetry::install(&args.telemetry()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("waymark: {e:#}");
                    std::process::exit(1);
                }
            };
            let code = match waymark_server::server::run(args.options()).await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            };
            telemetry.shutdown();
            code
        }
        Parsed::Client(cmd) => {
            restore_sigpipe();
            run_client(*cmd).await
        }
    };
    code
}
