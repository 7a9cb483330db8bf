//! The store's schema across builds. Migrations only ever add (tables, columns with a default
//! or nullable, indexes), so a replica keeps serving on a schema that a newer build migrated:
//! its statements name nothing that a newer migration took away. That is what makes a rolling
//! upgrade work: migrate once, then restart replicas one at a time.
//!
//! Opening a store either applies what it lacks ([`SchemaPolicy::Migrate`], the default) or
//! applies nothing and checks ([`SchemaPolicy::Expect`]), for replicas whose database role may
//! not change the schema: `waymark migrate` then runs with one that may.

use crate::{StoreError, StoreResult};

/// What opening a store does about its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaPolicy {
    /// Apply the migrations this build has that the database lacks.
    #[default]
    Migrate,
    /// Apply none: open only when the database has every migration this build needs, each as
    /// this build knows it. Migrations beyond them are a newer build's additions, and fine.
    Expect,
}

/// Checks what a database has applied (version, checksum) against what this build needs.
pub(crate) fn expect_applied(
    needed: &sqlx::migrate::Migrator,
    applied: Option<Vec<(i64, Vec<u8>)>>,
) -> StoreResult<()> {
    let Some(applied) = applied else {
        return Err(StoreError::Unavailable(
            "the database has no Waymark schema yet: run `waymark migrate` (with a role that may \
             change the schema) before starting replicas with --no-migrate"
                .into(),
        ));
    };
    let mut missing = Vec::new();
    for m in needed.iter().filter(|m| !m.migration_type.is_down_migration()) {
        match applied.iter().find(|(v, _)| *v == m.version) {
            None => missing.push(m.version.to_string()),
            Some((_, checksum)) if checksum.as_slice() != &*m.checksum => {
                return Err(StoreError::Unavailable(format!(
                    "migration {} in the database differs from this build's: the schema was \
                     changed by hand or by a build that is not a release",
                    m.version
                )))
            }
            Some(_) => {}
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Unavailable(format!(
            "the database schema is behind this build (missing migrations {}): run `waymark \
             migrate` with a role that may change the schema, then start this replica again",
            missing.join(", ")
        )))
    }
}
