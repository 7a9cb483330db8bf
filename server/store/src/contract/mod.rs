//! The storage contract by concern: one trait per kind of record, each with the types it
//! speaks in, and the transaction handle the engine composes operations from.
//! [`crate::Store`] is all of them together. Each trait is implemented once, for both backends,
//! in the file of the same name in `shared/`; where the backends differ it calls into theirs
//! through the `Backend` trait (`dialect.rs`).

pub mod children;
pub mod events;
pub mod keys;
pub mod lifecycle;
pub mod messages;
pub mod namespaces;
pub mod queues;
pub mod remote_steps;
pub mod schedules;
pub mod steps;
pub mod streams;
pub mod transaction;
pub mod workers;
pub mod workflows;
