//! `waymark backup PATH`: a consistent copy of an embedded (SQLite) database, taken while the
//! server runs, with every namespace's file beside it. Restore by pointing a server's
//! `--database-url` at the copy. PostgreSQL has its own tools (`pg_dump`, or base backups with
//! WAL archiving for point-in-time recovery): this command says so rather than half-doing it.

use clap::Args;

use waymark_server::server::DEFAULT_DATABASE_URL;

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// Where the copy goes: a file that does not exist yet (namespaces' copies go beside it,
    /// `<name>.<namespace>.db`).
    pub path: std::path::PathBuf,
    /// The database to copy (`sqlite:<path>`), as the server was given it.
    #[arg(long, default_value = DEFAULT_DATABASE_URL, env = "WAYMARK_DATABASE_URL")]
    pub database_url: String,
}

pub async fn run(args: BackupArgs) -> anyhow::Result<i32> {
    if !args.database_url.starts_with("sqlite:") {
        return Err(super::invalid(
            "waymark backup copies an embedded (sqlite:) database; back PostgreSQL up with its own \
             tools: pg_dump for a logical copy, or base backups with WAL archiving for point-in-time \
             recovery (README: Running on PostgreSQL)",
        ));
    }
    let started = std::time::Instant::now();
    let copies = waymark_store::sqlite::backup::backup(&args.database_url, &args.path).await?;
    for (namespace, file) in &copies {
        println!("{namespace}\t{}", file.display());
    }
    eprintln!(
        "backed up {} namespace(s) in {:.1} s; restore with --database-url sqlite:{}",
        copies.len(),
        started.elapsed().as_secs_f64(),
        args.path.display()
    );
    Ok(0)
}
