//! The side-effect log: each step of the test workflow appends one line
//! `<workflow_id> <step_id> <epoch> <pid>` to a file outside the workflow, so a test can count
//! how often each step really ran, and under which dispatch.

use std::{collections::HashMap, io::Write, path::Path};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub workflow_id: String,
    pub step_id: u32,
    pub epoch: u64,
    pub pid: u32,
}

/// Appends one effect. A single `write` on an O_APPEND file, so lines from concurrent writers
/// (threads or processes) never interleave.
pub fn append(path: &Path, e: &Effect) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{} {} {} {}\n", e.workflow_id, e.step_id, e.epoch, e.pid).as_bytes())
}

pub fn read(path: &Path) -> Vec<Effect> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut p = l.split(' ');
            Some(Effect {
                workflow_id: p.next()?.to_string(),
                step_id: p.next()?.parse().ok()?,
                epoch: p.next()?.parse().ok()?,
                pid: p.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// Effects grouped by (workflow, step).
pub fn by_step(effects: &[Effect]) -> HashMap<(String, u32), Vec<Effect>> {
    let mut m: HashMap<(String, u32), Vec<Effect>> = HashMap::new();
    for e in effects {
        m.entry((e.workflow_id.clone(), e.step_id)).or_default().push(e.clone());
    }
    m
}
