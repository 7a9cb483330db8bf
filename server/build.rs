//! Embeds the web console (`server/assets/console/`, built and committed by `make -C console build`) in
//! the binary: writes `$OUT_DIR/console_assets.rs`, a table of each file's name and bytes. Built
//! without a `server/assets/console/`, the table is empty and the console says so.

use std::{env, fs, path::PathBuf};

fn main() {
    let dist = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("assets/console");
    // A directory: cargo looks at every file under it.
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut names: Vec<String> = match fs::read_dir(&dist) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    let mut out = String::from(
        "/// The console's files: name (served at `/<name>`) and contents.\npub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for name in &names {
        let path = dist.join(name).canonicalize().unwrap();
        out.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    fs::write(
        PathBuf::from(env::var("OUT_DIR").unwrap()).join("console_assets.rs"),
        out,
    )
    .unwrap();
}
