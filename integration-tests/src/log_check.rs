//! What a server's log may not say in a fault test: a panic (Rust's `panicked at` message), or an
//! `ERROR` event (text or JSON format) that the test did not provoke on purpose. A test names the
//! errors it expects by a substring of their message, as narrow as it can; everything else at
//! ERROR fails it, quoted.

use std::path::Path;

/// The line every server start writes once it serves (`server.rs`): a log without it was not
/// written by the server it is checked for (or `WAYMARK_LOG` hides `info`), and scanning it
/// would prove nothing.
pub const READY_LINE: &str = "waymark server ready";

/// What the store says of a database that went away, in the `store error` a call failed by it
/// logs (sqlx's words for a connection closed under it or not to be had): the tests that stop
/// or restart PostgreSQL on purpose allow these — a statement the database refused for any other
/// reason is still an error.
pub const DATABASE_GONE: &[&str] = &[
    // The server process ended the session: a fast shutdown (57P01).
    "terminating connection due to administrator command",
    // The connection broke: an immediate shutdown, a reset, a refused reconnect.
    "error communicating with database:",
    // No connection could be had while it was down.
    "pool timed out while waiting for an open connection",
    // Connected while it started or stopped (57P03).
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
];

/// Lines quoted after an offending one when they continue it (a panic's message and its note,
/// a multi-line error), at most.
const CONTINUATION: usize = 4;

/// Distinct offending lines quoted in a failure, at most.
const QUOTED: usize = 20;

/// The level of a tracing event line: text (`<timestamp> ERROR target: message`, the level
/// the second word) or JSON (`{"level":"ERROR",...}`). `None` for anything else: a panic's
/// lines, a continuation of a multi-line message, an `eprintln!`.
pub fn level(line: &str) -> Option<String> {
    let line = line.trim_start();
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        return v.get("level")?.as_str().map(str::to_string);
    }
    let mut words = line.split_whitespace();
    let stamp = words.next()?;
    let is_stamp = stamp.len() >= 20 && stamp.as_bytes()[..4].iter().all(u8::is_ascii_digit) && stamp.contains('T');
    let level = words.next()?;
    (is_stamp && matches!(level, "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR")).then(|| level.to_string())
}

/// Whether `line` is a panic: Rust's panic message (`thread '…' panicked at file:line:col:`),
/// wherever in the line it is (another process's write may precede it).
pub fn is_panic(line: &str) -> bool {
    line.contains("panicked at")
}

/// The offending lines of a log, each with the lines that continue it: panics (never allowed)
/// and ERROR events containing none of `allowed`.
pub fn offending(text: &str, allowed: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let level = level(line);
        let bad = is_panic(line) || (level.as_deref() == Some("ERROR") && !allowed.iter().any(|a| line.contains(a)));
        if !bad {
            continue;
        }
        let mut quoted = line.to_string();
        for next in lines[i + 1..]
            .iter()
            .take(CONTINUATION)
            .take_while(|l| self::level(l).is_none() && !is_panic(l))
        {
            quoted.push_str("\n    ");
            quoted.push_str(next);
        }
        found.push(quoted);
    }
    found
}

/// Checks the log at `path`, written by `starts` starts of a server: it has a [`READY_LINE`]
/// for each (so it is the log, and not empty), and no panic or ERROR line outside `allowed`.
/// The error says which lines, quoted.
pub fn check(path: &Path, starts: usize, allowed: &[&str]) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("server log {}: {e}", path.display()))?;
    let ready = text.lines().filter(|l| l.contains(READY_LINE)).count();
    if ready < starts.max(1) {
        return Err(format!(
            "server log {} has {ready} {READY_LINE:?} lines for {starts} starts ({} bytes): not the server's log, \
             or WAYMARK_LOG hides info",
            path.display(),
            text.len()
        ));
    }
    let bad = offending(&text, allowed);
    if bad.is_empty() {
        return Ok(());
    }
    Err(format!(
        "server log {} has {} panic or unexpected ERROR lines (allowed: {allowed:?}):\n  {}",
        path.display(),
        bad.len(),
        summary(&bad).join("\n  ")
    ))
}

/// Offending lines to quote: each distinct one once (compared without its timestamp), its first
/// occurrence with how many times it was seen, at most [`QUOTED`] of them.
fn summary(bad: &[String]) -> Vec<String> {
    let mut distinct: Vec<(&str, &String, usize)> = Vec::new();
    for line in bad {
        let text = line.split_once(' ').map_or(line.as_str(), |(_, rest)| rest);
        match distinct.iter_mut().find(|(t, _, _)| *t == text) {
            Some((_, _, n)) => *n += 1,
            None => distinct.push((text, line, 1)),
        }
    }
    let mut quoted: Vec<String> = distinct
        .iter()
        .take(QUOTED)
        .map(|(_, line, n)| match n {
            1 => line.to_string(),
            n => format!("{line}\n    (seen {n} times)"),
        })
        .collect();
    if distinct.len() > QUOTED {
        quoted.push(format!("... and {} other lines", distinct.len() - QUOTED));
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
2026-12-03T08:21:58.101000Z  INFO waymark_server::server: waymark server ready listen=127.0.0.1:4000 store=\"postgres\"
2026-12-03T08:21:58.200000Z DEBUG waymark_server::engine: dispatched workflow_id=\"a\"
2026-12-03T08:21:58.300000Z  WARN waymark_server::engine::health: database not answering error=\"connection refused\"
2026-12-03T08:21:58.400000Z ERROR waymark_server::engine::error: store error detail=connection reset by peer
2026-12-03T08:21:58.489309Z ERROR waymark_server::engine::schedules::scheduler: stored schedule cannot be read; not fired schedule=nightly
thread 'tokio-runtime-worker' panicked at server/src/engine/worker.rs:10:5:
index out of bounds: the len is 0 but the index is 0
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
2026-12-03T08:21:59.000000Z  INFO waymark_server::server: waymark server stopped
";

    #[test]
    fn levels_of_text_and_json_lines() {
        let lines: Vec<&str> = SAMPLE.lines().collect();
        assert_eq!(level(lines[0]).as_deref(), Some("INFO"));
        assert_eq!(level(lines[1]).as_deref(), Some("DEBUG"));
        assert_eq!(level(lines[2]).as_deref(), Some("WARN"));
        assert_eq!(level(lines[3]).as_deref(), Some("ERROR"));
        assert_eq!(level(lines[5]), None, "a panic is no tracing line");
        assert_eq!(level(lines[6]), None);
        let json = r#"{"timestamp":"2026-12-03T08:21:58.4Z","level":"ERROR","fields":{"message":"store error"},"target":"waymark_server::engine::error"}"#;
        assert_eq!(level(json).as_deref(), Some("ERROR"));
        assert_eq!(level(&json.replace("ERROR", "INFO")).as_deref(), Some("INFO"));
        // A message that merely says ERROR is at its own level.
        assert_eq!(
            level("2026-12-03T08:21:58.1Z  INFO waymark_server: the word ERROR in a message").as_deref(),
            Some("INFO")
        );
    }

    #[test]
    fn panics_and_errors_not_allowed_are_found_with_their_lines() {
        let bad = offending(SAMPLE, &["store error"]);
        assert_eq!(bad.len(), 2, "{bad:#?}");
        assert!(bad[0].contains("stored schedule cannot be read"), "{}", bad[0]);
        assert!(
            bad[1].starts_with("thread 'tokio-runtime-worker' panicked at server/src/engine/worker.rs:10:5:"),
            "{}",
            bad[1]
        );
        assert!(
            bad[1].contains("index out of bounds"),
            "the panic's message is quoted: {}",
            bad[1]
        );
        assert!(!bad[1].contains("server stopped"), "the next event is not: {}", bad[1]);

        // Nothing allowed: both ERROR lines and the panic.
        assert_eq!(offending(SAMPLE, &[]).len(), 3);
        // A panic cannot be allowed, even by a substring of it.
        assert_eq!(
            offending(SAMPLE, &["store error", "stored schedule", "panicked"]).len(),
            1
        );
        // INFO, WARN and DEBUG lines alone are clean.
        let quiet: String = SAMPLE.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert!(offending(&quiet, &[]).is_empty());
        // JSON lines.
        let json =
            r#"{"timestamp":"2026-12-03T08:21:58.4Z","level":"ERROR","fields":{"message":"store error"},"target":"t"}"#;
        assert_eq!(offending(json, &[]).len(), 1);
        assert!(offending(json, &["store error"]).is_empty());
    }

    #[test]
    fn a_log_is_checked_only_when_it_is_the_servers() {
        let dir = std::env::temp_dir().join(format!("waymark-log-check-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("server.log");
        let missing = check(&path, 1, &[]).unwrap_err();
        assert!(missing.contains("server.log"), "{missing}");
        std::fs::write(&path, "").unwrap();
        assert!(check(&path, 1, &[])
            .unwrap_err()
            .contains("0 \"waymark server ready\" lines"));
        std::fs::write(&path, SAMPLE).unwrap();
        let err = check(&path, 1, &["store error"]).unwrap_err();
        assert!(err.contains("2 panic or unexpected ERROR lines"), "{err}");
        assert!(err.contains("stored schedule cannot be read"), "{err}");
        assert!(err.contains("index out of bounds"), "{err}");
        // One ready line for two starts: the second start's log is missing.
        assert!(check(&path, 2, &["store error"]).unwrap_err().contains("for 2 starts"));
        let clean: String = SAMPLE.lines().take(4).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, clean).unwrap();
        assert_eq!(check(&path, 1, &["store error"]), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_database_gone_is_allowed_and_a_statement_refused_is_not() {
        let log = "\
2026-12-03T09:13:14.626418Z ERROR waymark_server::engine::error: store error detail=error returned from database: terminating connection due to administrator command at line 3211
2026-12-03T09:13:15.333390Z ERROR waymark_server::engine::error: store error detail=database unavailable: error communicating with database: expected to read 5 bytes, got 0 bytes at EOF
2026-12-03T09:13:42.629308Z ERROR waymark_server::engine::error: store error detail=pool timed out while waiting for an open connection
2026-12-03T09:13:42.828419Z ERROR waymark_server::engine::error: store error detail=pool timed out while waiting for an open connection
2026-12-03T09:13:43.000000Z ERROR waymark_server::engine::error: store error detail=error returned from database: relation \"workflows\" does not exist
";
        let bad = offending(log, DATABASE_GONE);
        assert_eq!(bad.len(), 1, "{bad:#?}");
        assert!(bad[0].contains("does not exist"), "{}", bad[0]);
        // Repeated lines are quoted once, with a count.
        let quoted = summary(&offending(log, &[]));
        assert_eq!(quoted.len(), 4, "{quoted:#?}");
        assert!(quoted[2].ends_with("(seen 2 times)"), "{}", quoted[2]);
    }
}
