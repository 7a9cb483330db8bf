//! The storage contract by concern: one trait per kind of record, each with the types it
//! speaks in. [`crate::Store`] is all of them together. A backend implements each trait in the
//! file of the same name; SQL both backends run is written once in `sql/`.

pub mod children;
pub mod events;
pub mod messages;
pub mod queues;
pub mod remote_steps;
pub mod schedules;
pub mod steps;
pub mod streams;
pub mod transaction;
pub mod workers;
pub mod workflows;
