//! `waymark completion SHELL`: the scripts complete what the command line takes — checked by
//! loading the bash one into bash and asking it, as a shell does on Tab.

use std::process::Command;

use waymark_integration_tests::waymark_bin;

fn completion(shell: &str) -> std::process::Output {
    Command::new(waymark_bin())
        .args(["completion", shell])
        .output()
        .unwrap()
}

#[test]
fn bash_completes_commands_and_their_flags() {
    let script = completion("bash");
    assert!(script.status.success());
    let dir = std::env::temp_dir().join(format!("waymark-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("waymark.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    // What Tab offers after `waymark wor` and after `waymark backup --da`.
    let ask = |words: &str, cword: usize| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
                 _waymark waymark \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                file.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut offered: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        offered.sort();
        offered
    };
    assert_eq!(ask("waymark wor", 1), ["worker", "workflow"]);
    assert_eq!(ask("waymark backup --da", 2), ["--database-url"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn zsh_and_fish_get_scripts_of_their_own_and_an_unknown_shell_is_a_usage_error() {
    let zsh = String::from_utf8(completion("zsh").stdout).unwrap();
    assert!(zsh.starts_with("#compdef waymark"), "{zsh:.80}");
    let fish = String::from_utf8(completion("fish").stdout).unwrap();
    assert!(fish.contains("complete -c waymark"), "{fish:.200}");
    let bad = completion("tcsh");
    assert_eq!(bad.status.code(), Some(2));
}
