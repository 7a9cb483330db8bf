//! What this replica knows of workflow names and queues, cached from the store so starts and
//! claims skip a lookup.

use std::{
    collections::{HashMap, HashSet},
    sync::RwLock,
};

use waymark_store::QueueLimits;

#[derive(Default)]
pub struct Catalog {
    /// Workflow names known to be registered. Names are never forgotten, so a positive answer
    /// can be cached.
    pub(crate) names: RwLock<HashSet<String>>,
    /// Queues known to exist, with their limits as last read (see `queues.rs`): which queues
    /// this replica claims one at a time under their lock, and which it may dispatch directly.
    pub(crate) queues: RwLock<HashMap<String, QueueLimits>>,
}
