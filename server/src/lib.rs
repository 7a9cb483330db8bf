//! The Waymark server: engine, API, authentication, telemetry and console, over the stores.
//!
//! - [`engine`]: every decision about workflows, over the store contract and an injected clock.
//! - [`api`]: tonic services, thin adapters onto the engine.
//! - [`ops`]: the worker stream's durable operations, one file each, from request to commit.
//! - [`wire`]: protobuf messages and engine types, each in the other's terms.
//! - [`server`]: start-up: configuration, store, migrations, serving, drain.
//! - [`duration`]: durations as operators write them (`250ms`, `1h30m`, `30d`).
//! - [`telemetry`]: logs, traces, metrics and health endpoints — what operators see.
//! - [`allocator`]: how the server hands freed memory back to the system.
//! - The stores live in the `waymark-store` crate (`server/store`); the `waymark` command line,
//!   which runs this server as `waymark server`, in `waymark-cli` (`cli/`).

pub mod allocator;
pub mod api;
pub mod auth;
pub mod console;
pub mod duration;
pub mod engine;
pub mod namespaces;
pub mod ops;
pub mod server;
pub mod telemetry;
pub mod wire;
