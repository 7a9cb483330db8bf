//! Backups of an embedded database, taken while the server runs: `VACUUM INTO` copies what one
//! read transaction sees (WAL mode lets it read beside the writer), so the copy is consistent
//! and whole without stopping anything. Each namespace is a file of its own, copied the same way
//! under the name it has beside the copy of the default one.

use std::path::{Path, PathBuf};

use sqlx::{sqlite::SqliteConnectOptions, ConnectOptions, Connection};

use super::namespace_url;
use crate::rows::db_error;
use crate::{StoreError, StoreResult};

/// The file a `sqlite:` URL names.
fn file_of(url: &str) -> &str {
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    path.split('?').next().unwrap_or(path)
}

/// Copies the database at `url` (and every namespace's file beside it) to `to`, a file that
/// must not exist yet; namespaces' copies go beside it, named as the server names them. Returns
/// each namespace with the file it was copied to, `default` first.
pub async fn backup(url: &str, to: &Path) -> StoreResult<Vec<(String, PathBuf)>> {
    let source = file_of(url);
    if !Path::new(source).exists() {
        return Err(StoreError::Unavailable(format!("no database at {source}")));
    }
    let target = format!("sqlite:{}", to.display());
    let mut namespaces = vec!["default".to_string()];
    namespaces.extend(names(url).await?.into_iter().filter(|n| n != "default"));
    // Refuse before writing anything: a backup never overwrites.
    let copies: Vec<(String, PathBuf)> = namespaces
        .into_iter()
        .map(|n| {
            let file = PathBuf::from(file_of(&namespace_url(&target, &n)));
            (n, file)
        })
        .collect();
    if let Some((_, taken)) = copies.iter().find(|(_, f)| f.exists()) {
        return Err(StoreError::Unavailable(format!(
            "{} exists: a backup never overwrites; choose another path",
            taken.display()
        )));
    }
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Unavailable(format!("cannot create {dir:?}: {e}")))?;
    }
    for (name, file) in &copies {
        let from = namespace_url(url, name);
        if !Path::new(file_of(&from)).exists() {
            // Listed but never opened here (made through another replica's file system?):
            // nothing to copy.
            continue;
        }
        let mut c = read_only(&from).await?;
        sqlx::query("VACUUM INTO ?")
            .bind(file.display().to_string())
            .execute(&mut c)
            .await
            .map_err(db_error)?;
        c.close().await.map_err(db_error)?;
    }
    Ok(copies)
}

async fn read_only(url: &str) -> StoreResult<sqlx::SqliteConnection> {
    format!("sqlite://{}", file_of(url))
        .parse::<SqliteConnectOptions>()
        .map_err(db_error)?
        .read_only(true)
        .busy_timeout(std::time::Duration::from_secs(30))
        .connect()
        .await
        .map_err(db_error)
}

/// The namespaces the default database lists.
async fn names(url: &str) -> StoreResult<Vec<String>> {
    let mut c = read_only(url).await?;
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM namespaces ORDER BY name")
        .fetch_all(&mut c)
        .await
        .map_err(db_error)?;
    c.close().await.map_err(db_error)?;
    Ok(names)
}
