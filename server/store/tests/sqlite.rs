//! The conformance suite against SQLite: each case on its own new database file.

waymark_store_conformance::conformance_tests!(waymark_store_conformance::fixtures::sqlite);

/// Every table whose rows go with their workflow (`ON DELETE CASCADE`) must find a workflow's
/// rows through an index: the cascade runs once per deleted workflow, and a scan there makes
/// DeleteWorkflow and the retention collector read the whole table each time.
#[tokio::test]
async fn deleting_a_workflow_finds_its_rows_by_index_in_every_table() {
    use sqlx::{Connection, SqliteConnection};
    let path = std::env::temp_dir().join(format!("waymark-plan-{}.db", uuid::Uuid::new_v4().simple()));
    let url = format!("sqlite:{}", path.display());
    drop(waymark_store::sqlite::SqliteStore::open(&url).await.unwrap());
    let mut c = SqliteConnection::connect(&url).await.unwrap();
    let owned: Vec<String> = sqlx::query_scalar(
        "SELECT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f \
         WHERE m.type = 'table' AND f.\"table\" = 'workflows' AND f.on_delete = 'CASCADE' ORDER BY m.name",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert!(owned.len() >= 7 && owned.contains(&"messages".to_string()), "{owned:?}");
    for table in &owned {
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN SELECT rowid FROM {table} WHERE workflow_id = 'x'"
        )))
        .fetch_all(&mut c)
        .await
        .unwrap();
        let detail: Vec<&str> = plan.iter().map(|p| p.3.as_str()).collect();
        assert!(
            detail.iter().any(|d| d.starts_with("SEARCH") && d.contains("INDEX")),
            "{table} is scanned for a workflow's rows: {detail:?}"
        );
    }
    drop(c);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
