//! The docs' grpcurl examples, run as written: each `grpcurl` command in a `sh` block of a
//! section is taken from the document itself (README.md's quickstart, docs/operators/secure.md,
//! the waits guide's start-and-send and updates)
//! and run by bash with only the server's address changed (`127.0.0.1:7450`,
//! `waymark.internal:7450` → the test server), so the docs cannot drift from what the server
//! answers. grpcurl comes from `make deps` (`.tools/bin/grpcurl`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use waymark_integration_tests::{
    own_bin, secured_server, skip_or_fail, wait_for_registration, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{ApiKeySpec, Client, Role};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn grpcurl() -> Option<PathBuf> {
    let path = root().join(".tools/bin/grpcurl");
    if path.exists() {
        Some(path)
    } else {
        skip_or_fail(&format!("{} is missing (run `make deps`)", path.display()));
        None
    }
}

/// The grpcurl commands of the section of `file` (relative to the repository's root) headed
/// `heading` — that line exactly, e.g. `## Five-minute quickstart` — up to the next heading of
/// the same or a higher level, continuation lines joined.
fn commands(file: &str, heading: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let level = heading.len() - heading.trim_start_matches('#').len();
    assert!(level > 0, "{heading:?} is not a heading");
    let text = format!("\n{text}");
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading:?} in {file}"));
    let section = &text[start + heading.len() + 2..];
    // The section ends at the next heading of its level or above, outside code blocks.
    let mut end = section.len();
    let mut at = 0;
    let mut fenced = false;
    for line in section.split_inclusive('\n') {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            let hashes = line.len() - line.trim_start_matches('#').len();
            if hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
                end = at;
                break;
            }
        }
        at += line.len();
    }
    let section = &section[..end];
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut current = String::new();
    for line in section.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh" && !in_sh;
            continue;
        }
        if !in_sh {
            continue;
        }
        let line = line.trim_end();
        if current.is_empty() && !line.starts_with("grpcurl") {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(!out.is_empty(), "no grpcurl commands under {heading:?} in {file}");
    out
}

/// Runs one documented command with bash in `dir`, the address replaced: (success, output).
fn run(command: &str, port: u16, dir: &Path, env: &[(&str, &str)]) -> (bool, String) {
    let grpcurl = grpcurl().expect("checked");
    let addr = format!("127.0.0.1:{port}");
    let line = command
        .replace("127.0.0.1:7450", &addr)
        .replace("waymark.internal:7450", &addr)
        .replacen("grpcurl", &grpcurl.display().to_string(), 1);
    let out = Command::new("bash")
        .args(["-c", &line])
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_grpcurl_commands_work_as_written() {
    if grpcurl().is_none() {
        return;
    }
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let server = ServerProcess::start(&db, &[]).await;
    // The quickstart's worker, as the README runs it.
    let example = own_bin("examples/quickstart");
    let _worker = WorkerProcess::from_command(
        Command::new(example).env("WAYMARK_SERVER", &server.addr),
        &db.dir.join("effects.log"),
        "quickstart",
    );
    wait_for_registration(&server.client().await, "quickstart").await;
    let cmds = commands("README.md", "## Five-minute quickstart");
    assert_eq!(cmds.len(), 3, "{cmds:?}");
    let expect = ["\"greet-ada\"", "Hello, Ada!", "StartWorkflow"];
    for (cmd, want) in cmds.iter().zip(expect) {
        let (ok, text) = run(cmd, server.port, &db.dir, &[]);
        assert!(ok && text.contains(want), "{cmd}\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_security_grpcurl_commands_work_as_written() {
    if grpcurl().is_none() {
        return;
    }
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let (server, admin) = secured_server(&db, &[]).await;
    // The document's certificate file names are those of the directory the commands run in.
    let certs = db.dir.join("certs");
    let admin = Client::connect_with(&server.connect.clone().api_key(admin))
        .await
        .unwrap();
    let (_, reader) = admin
        .create_api_key(&ApiKeySpec {
            name: "readme".into(),
            role: Role::Reader,
            namespaces: vec![],
            name_patterns: vec![],
            expires_at_ms: None,
        })
        .await
        .unwrap();
    let cmds = commands("docs/operators/secure.md", "# Security");
    let grpc: Vec<&String> = cmds.iter().filter(|c| c.contains("ListQueues")).collect();
    assert_eq!(grpc.len(), 2, "{cmds:?}");
    let env = [("WAYMARK_API_KEY", reader.as_str())];
    let (ok, text) = run(grpc[0], server.port, &certs, &env);
    assert!(ok && text.contains("\"default\""), "{}\n{text}", grpc[0]);
    let (ok, text) = run(grpc[1], server.port, &certs, &env);
    assert!(!ok && text.contains("Unauthenticated"), "{}\n{text}", grpc[1]);
}

/// The waits guide's grpcurl commands for start-and-send and updates, against the test worker
/// whose `inbox` and `cart` they name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_start_and_send_and_update_grpcurl_commands_work_as_written() {
    if grpcurl().is_none() {
        return;
    }
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let server = ServerProcess::start(&db, &[]).await;
    let _worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 10, "guide");
    let client = server.client().await;
    wait_for_registration(&client, "cart").await;
    let cmds = commands("docs/guide/waits.md", "## Start-and-send");
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    let (ok, text) = run(&cmds[0], server.port, &db.dir, &[]);
    assert!(
        ok && text.contains("\"created\": true") && text.contains("customer-42"),
        "{}\n{text}",
        cmds[0]
    );
    let got = client.messages("customer-42").await.unwrap();
    assert_eq!(got.len(), 1, "{got:?}");

    let cmds = commands("docs/guide/waits.md", "## Updates");
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    let (ok, text) = run(&cmds[0], server.port, &db.dir, &[]);
    assert!(ok && text.contains("cart-7"), "{}\n{text}", cmds[0]);
    let (ok, text) = run(&cmds[1], server.port, &db.dir, &[]);
    assert!(
        ok && text.contains("\"total\": 2") && text.contains("\"u-1\""),
        "{}\n{text}",
        cmds[1]
    );
}
