//! What this replica knows of workflow names, cached from the store so starts skip a lookup.
//! (What it knows of queues is the queues service's: `queues.rs`.)

use std::{collections::HashSet, sync::RwLock};

#[derive(Default)]
pub struct Catalog {
    /// Workflow names known to be registered. Names are never forgotten, so a positive answer
    /// can be cached.
    pub(crate) names: RwLock<HashSet<String>>,
}
