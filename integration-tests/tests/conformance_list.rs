//! Every SDK's own suite covers every scenario of `integration-tests/conformance/scenarios.txt`:
//! each scenario id must appear as `conformance: <id>` in the SDK's test sources. The suites
//! themselves run under `make test`; this makes sure none of them quietly drops a scenario.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn scenarios() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("integration-tests/conformance/scenarios.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// The text of every file under `dir` whose name ends with one of `suffixes`.
fn sources(dir: &Path, suffixes: &[&str]) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !name.starts_with('.') && name != "node_modules" && name != "gen" {
                    stack.push(path);
                }
            } else if suffixes.iter().any(|s| name.ends_with(s)) {
                text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    text
}

#[test]
fn every_sdk_covers_every_conformance_scenario() {
    let ids = scenarios();
    assert!(ids.len() >= 9, "the list is read: {ids:?}");
    let suites = [
        ("rust", root().join("integration-tests/tests"), vec![".rs"]),
        ("python", root().join("sdk-clients/python/tests"), vec![".py"]),
        ("go", root().join("sdk-clients/go"), vec!["_test.go"]),
        ("typescript", root().join("sdk-clients/typescript/test"), vec![".ts"]),
    ];
    let mut missing = Vec::new();
    for (sdk, dir, suffixes) in &suites {
        let text = sources(dir, suffixes);
        for id in &ids {
            if !text.contains(&format!("conformance: {id}\n")) && !text.contains(&format!("conformance: {id} ")) {
                missing.push(format!("{sdk}: {id}"));
            }
        }
    }
    assert!(missing.is_empty(), "scenarios without a marked test: {missing:?}");
}
