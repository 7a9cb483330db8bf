//! The Waymark server and CLI.
//!
//! - [`engine`]: every decision about workflows, over the store contract and an injected clock.
//! - [`api`]: tonic services, thin adapters onto the engine.
//! - [`server`]: start-up: configuration, store, migrations, serving, drain.
//! - [`cli`]: the `waymark` command line (`server`, `workflow …`).
//! - [`duration`]: durations as operators write them (`250ms`, `1h30m`, `30d`).
//! - [`telemetry`]: logs, traces, metrics and health endpoints — what operators see.
//! - [`allocator`]: how the server hands freed memory back to the system.
//! - The stores live in the `waymark-store` crate (`server/store`).

pub mod allocator;
pub mod api;
pub mod auth;
pub mod cli;
pub mod console;
pub mod duration;
pub mod engine;
pub mod namespaces;
pub mod server;
pub mod telemetry;
