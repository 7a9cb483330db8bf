//! How the server uses glibc's allocator, so that memory it freed after a burst of load goes
//! back to the system instead of staying resident for the life of the process.
//!
//! Two settings, both no-ops off glibc:
//! - At most two malloc arenas ([`limit_arenas`]). glibc gives each thread that allocates under
//!   contention an arena of its own (up to eight per core), and an arena keeps what is freed
//!   into it: a server whose runtime, database and blocking threads all allocate ends up holding
//!   several arenas' worth of freed memory after a burst. Two keep allocation fast on the
//!   runtime's threads (measured: 7 MiB less resident after the bench's workloads).
//! - A periodic trim ([`spawn_trimmer`]). glibc gives memory back on its own only from the top
//!   of an arena; a burst (a thousand workflows' step writes in flight at once) leaves freed
//!   chunks below live ones, resident but unused. `malloc_trim` hands those pages back. Measured
//!   on PostgreSQL after the bench's throughput workloads: 36.7 MiB resident, 24.5 MiB after one
//!   trim. It walks the arenas' free lists under their locks; it runs on a blocking thread, off
//!   the runtime's, and ten seconds apart (its cost was not measured separately; the bench's
//!   throughput with it is within the run-to-run spread).

use std::time::Duration;

/// How often freed memory is handed back.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Caps glibc's malloc arenas at two. Call before any thread starts, as mallopt requires.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; no other thread exists yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Hands freed memory back to the system every [`TRIM_EVERY`], for as long as the runtime runs.
pub fn spawn_trimmer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // SAFETY: malloc_trim only releases free memory; it is safe from any thread.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
    });
}
