//! CI runs on a fresh Debian machine: every program a test, a bench helper
//! or a test-server script spawns must be installed by `.ci/run` (its
//! `tools=(program=package ...)` list) and named in the README's install
//! line. This test finds what is spawned by reading the sources:
//!
//! - Rust (`tests/`, `testkit/`, `benches/`, `examples/*/tests/`): every
//!   `Command::new(ARG)`, where ARG is a string literal, a `const` of the
//!   same file, or `env!(...)` (our own binaries); any other ARG needs a
//!   `// spawns: PROGRAM...` comment on one of the three lines above it.
//! - Shell (`tests/run.sh`, `tests/servers/*.sh`, `tests/world/*.sh`,
//!   `benches/*.sh`): every word in command position (after `nohup`,
//!   `nice`, `exec`, `env`, `time` too), minus shell keywords, builtins,
//!   the script's own functions and what every Debian system has;
//!   programs a script runs through a helper of its own are named in a
//!   `# spawns: ...` comment.
//!
//! Cheap (it reads a few dozen files), so it runs with every `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bash keywords and builtins: never a program to install.
const SHELL: &[&str] = &[
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "for",
    "while",
    "until",
    "do",
    "done",
    "case",
    "esac",
    "in",
    "function",
    "select",
    "time",
    "!",
    "{",
    "}",
    "[[",
    "]]",
    "[",
    "]",
    "cd",
    "echo",
    "printf",
    "read",
    "set",
    "shift",
    "source",
    ".",
    "trap",
    "wait",
    "kill",
    "exit",
    "return",
    "local",
    "export",
    "declare",
    "readonly",
    "unset",
    "eval",
    "exec",
    "command",
    "type",
    "test",
    "true",
    "false",
    ":",
    "let",
    "pushd",
    "popd",
    "mapfile",
    "readarray",
    "getopts",
    "hash",
    "ulimit",
    "umask",
    "times",
    "jobs",
    "disown",
    "break",
    "continue",
    "builtin",
    "pwd",
];

/// Programs of Debian's essential packages (coreutils, grep, sed,
/// findutils, mawk, diffutils, gzip, tar, debianutils, dpkg, apt, bash,
/// util-linux): on every Debian system. And the Rust toolchain, which the
/// machine brings.
const BASE: &[&str] = &[
    "bash",
    "sh",
    "cat",
    "cp",
    "mv",
    "rm",
    "mkdir",
    "rmdir",
    "ln",
    "ls",
    "chmod",
    "chown",
    "touch",
    "head",
    "tail",
    "sort",
    "uniq",
    "wc",
    "tr",
    "cut",
    "seq",
    "sleep",
    "date",
    "dirname",
    "basename",
    "env",
    "nice",
    "nohup",
    "mktemp",
    "tee",
    "stat",
    "du",
    "df",
    "sha256sum",
    "md5sum",
    "realpath",
    "readlink",
    "timeout",
    "yes",
    "id",
    "whoami",
    "nproc",
    "split",
    "paste",
    "join",
    "comm",
    "od",
    "expr",
    "dd",
    "sync",
    "install",
    "tac",
    "fold",
    "shuf",
    "numfmt",
    "stdbuf",
    "uname",
    "grep",
    "sed",
    "find",
    "xargs",
    "awk",
    "mawk",
    "diff",
    "cmp",
    "gzip",
    "gunzip",
    "zcat",
    "tar",
    "which",
    "dpkg",
    "dpkg-query",
    "apt-get",
    "apt-cache",
    "debconf-set-selections",
    "taskset",
    "flock",
    "getopt",
    "cargo",
    "rustc",
    "rustup",
];

/// Wrappers whose next word (after their options) is the program they run.
const WRAPPERS: &[&str] = &["nohup", "nice", "exec", "env", "time", "xargs", "command"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `.ci/run`'s `tools=(program=package ...)`.
fn ci_tools() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let start = text
        .find("\ntools=(")
        .expect(".ci/run has a `tools=(program=package ...)` list");
    let body = &text[start + "\ntools=(".len()..];
    let body = &body[..body.find("\n)").expect("the tools list ends with `)`")];
    body.lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (program, package) = l
                .split_once('=')
                .unwrap_or_else(|| panic!(".ci/run tools: `{l}` is not program=package"));
            (program.to_string(), package.to_string())
        })
        .collect()
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The programs named by `spawns:` comments in `text` (marker `marker`):
/// `spawns: a b c (why)`, the names before the first parenthesis.
fn declared(text: &str, marker: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some((_, rest)) = line.split_once(marker) {
            let names = rest.split('(').next().unwrap();
            out.extend(names.split_whitespace().map(|w| (i + 1, w.to_string())));
        }
    }
    out
}

/// Programs a Rust file spawns, with their line numbers.
fn rust_spawns(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = declared(&text, "// spawns:");
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("Command::new(") else {
            continue;
        };
        let arg = line[at + "Command::new(".len()..].trim();
        let program = if let Some(literal) = arg.strip_prefix('"') {
            literal.split('"').next().unwrap().to_string()
        } else if arg.starts_with("env!(") {
            continue; // CARGO_BIN_EXE_*: a binary this workspace builds
        } else if let Some(name) = arg
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        {
            let decl = format!("const {name}: &str = \"");
            let at = text.find(&decl).unwrap_or_else(|| {
                panic!(
                    "{}:{}: Command::new({name}): no `{decl}...` in the file",
                    path.display(),
                    i + 1
                )
            });
            text[at + decl.len()..]
                .split('"')
                .next()
                .unwrap()
                .to_string()
        } else {
            let marked = lines[i.saturating_sub(3)..i]
                .iter()
                .any(|l| l.contains("// spawns:"));
            assert!(
                marked,
                "{}:{}: Command::new({arg}: name what it runs in a `// spawns: PROGRAM` comment above it",
                path.display(),
                i + 1
            );
            continue;
        };
        let program = program.rsplit('/').next().unwrap().to_string();
        out.push((i + 1, program));
    }
    out
}

/// A shell script cut into words, quoted text replaced by `"`, with `;` for
/// every place a new command may start. Heredoc bodies, comments, `${...}`
/// and `$((...))` are dropped; `$(...)` and backticks start commands.
fn shell_words(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    let mut line = 1;
    let mut heredocs: Vec<String> = Vec::new();
    let mut i = 0;
    let flush = |word: &mut String, words: &mut Vec<(usize, String)>, line: usize| {
        if !word.is_empty() {
            words.push((line, std::mem::take(word)));
        }
    };
    // Skips a quoted or bracketed run starting at `i` (at the opening char).
    fn skip_balanced(chars: &[char], mut i: usize, open: char, close: char) -> usize {
        let mut depth = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 1,
                '\'' if open != '\'' => i = skip_quote(chars, i, '\''),
                '"' if open != '"' => i = skip_quote(chars, i, '"'),
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        i
    }
    fn skip_quote(chars: &[char], mut i: usize, quote: char) -> usize {
        i += 1;
        while i < chars.len() && chars[i] != quote {
            if chars[i] == '\\' && quote == '"' {
                i += 1;
            }
            i += 1;
        }
        i
    }
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                flush(&mut word, &mut words, line);
                words.push((line, ";".into()));
                line += 1;
                // Heredoc bodies end at a line holding only their delimiter.
                for delimiter in std::mem::take(&mut heredocs) {
                    loop {
                        let end = chars[i + 1..]
                            .iter()
                            .position(|&c| c == '\n')
                            .map_or(chars.len(), |p| i + 1 + p);
                        let body: String = chars[(i + 1).min(chars.len())..end].iter().collect();
                        i = end;
                        line += 1;
                        if body.trim() == delimiter || i >= chars.len() {
                            break;
                        }
                    }
                }
            }
            '#' if word.is_empty() => {
                while i + 1 < chars.len() && chars[i + 1] != '\n' {
                    i += 1;
                }
            }
            '\\' => i += 1,
            '\'' | '"' => {
                // "$(cmd)" inside double quotes runs cmd: look inside for it.
                let end = skip_quote(&chars, i, c);
                let inner: Vec<char> = chars[i + 1..end.min(chars.len())].to_vec();
                let mut k = 0;
                while c == '"' && k + 1 < inner.len() {
                    if inner[k] == '$' && inner[k + 1] == '(' && inner.get(k + 2) != Some(&'(') {
                        let close = skip_balanced(&inner, k + 1, '(', ')');
                        let command: String = inner[k + 2..close.min(inner.len())].iter().collect();
                        words.push((line, ";".into()));
                        for (l, w) in shell_words(&command) {
                            words.push((line + l - 1, w));
                        }
                        words.push((line, ";".into()));
                        k = close;
                    }
                    k += 1;
                }
                let inner: String = inner.iter().collect();
                line += inner.matches('\n').count();
                word.push('"');
                i = end;
            }
            '$' if chars.get(i + 1) == Some(&'{') => {
                i = skip_balanced(&chars, i + 1, '{', '}');
                word.push('"');
            }
            '$' if chars.get(i + 1) == Some(&'(') && chars.get(i + 2) == Some(&'(') => {
                i = skip_balanced(&chars, i + 1, '(', ')');
                word.push('"');
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                flush(&mut word, &mut words, line);
                words.push((line, ";".into()));
                i += 1;
            }
            '<' if chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                flush(&mut word, &mut words, line);
                let mut j = i + 2;
                if chars.get(j) == Some(&'-') {
                    j += 1;
                }
                let mut delimiter = String::new();
                while j < chars.len() && !chars[j].is_whitespace() && !";|&)".contains(chars[j]) {
                    if chars[j] != '\'' && chars[j] != '"' {
                        delimiter.push(chars[j]);
                    }
                    j += 1;
                }
                heredocs.push(delimiter);
                i = j - 1;
            }
            '(' if word.is_empty() && chars.get(i + 1) == Some(&'(') => {
                // `(( arithmetic ))`: no commands inside.
                i = skip_balanced(&chars, i, '(', ')');
            }
            ';' | '|' | '&' | '(' | ')' | '`' => {
                flush(&mut word, &mut words, line);
                let token = match c {
                    ')' => ")",
                    '|' if chars.get(i + 1) != Some(&'|')
                        && chars.get(i.wrapping_sub(1)) != Some(&'|') =>
                    {
                        "|"
                    }
                    '(' => "(",
                    _ => ";",
                };
                words.push((line, token.into()));
            }
            c if c.is_whitespace() => flush(&mut word, &mut words, line),
            c => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut words, line);
    words
}

/// The functions a shell script defines (`name() {`, `function name {`).
fn shell_functions(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("function ").trim_start();
            let name: String = l
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "_-".contains(*c))
                .collect();
            (!name.is_empty() && l[name.len()..].trim_start().starts_with("()")).then_some(name)
        })
        .collect()
}

/// The project's files a shell script sources (`source benches/x.sh`, a
/// path from the project's root).
fn sourced(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix("source ").or_else(|| l.strip_prefix(". "))?;
            let file = root().join(rest.split_whitespace().next()?);
            file.is_file().then_some(file)
        })
        .collect()
}

/// Programs a shell script spawns, with their line numbers.
fn shell_spawns(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = declared(&text, "# spawns:");
    // Its own functions, and those of the files it sources (which are
    // read for what they spawn on their own).
    let mut functions = shell_functions(&text);
    for file in sourced(&text) {
        functions.extend(shell_functions(&std::fs::read_to_string(file).unwrap()));
    }
    let words = shell_words(&text);
    let mut command_position = true;
    let mut in_case = 0usize;
    let mut in_array = false;
    let mut i = 0;
    while i < words.len() {
        let (line, word) = (&words[i].0, words[i].1.as_str());
        let next = words.get(i + 1).map(|(_, w)| w.as_str());
        i += 1;
        if in_array {
            in_array = word != ")";
            continue;
        }
        if [";", "(", ")", "|"].contains(&word) {
            command_position = true;
            continue;
        }
        if !command_position {
            if word == "in" && in_case > 0 {
                command_position = true;
            }
            continue;
        }
        match word {
            "case" => {
                in_case += 1;
                command_position = false;
                continue;
            }
            "esac" => {
                in_case -= 1;
                continue;
            }
            "then" | "do" | "else" | "elif" | "if" | "while" | "until" | "!" | "{" | "}"
            | "time" => continue,
            "for" | "select" => {
                command_position = false;
                continue;
            }
            _ => {}
        }
        // NAME=value and NAME=(array) before a command.
        if let Some(eq) = word.find('=') {
            if word[..eq]
                .trim_end_matches('+')
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                if eq + 1 == word.len() && next == Some("(") {
                    // `x=(` arrives as `x=` then `(`: skip to the `)`.
                    in_array = true;
                    i += 1;
                }
                continue;
            }
        }
        // A case pattern: `udp)` or `a|b)`.
        if in_case > 0 {
            let mut j = i - 1;
            while words.get(j + 1).is_some_and(|(_, w)| w == "|") && words.get(j + 2).is_some() {
                j += 2;
            }
            if words.get(j + 1).is_some_and(|(_, w)| w == ")") {
                i = j + 2;
                continue;
            }
        }
        command_position = false;
        if word.starts_with(['"', '$', '-', '.', '/', '>', '<', '~', '*', '['])
            || word.chars().next().is_some_and(|c| c.is_ascii_digit())
        {
            continue;
        }
        if word == "command" && next == Some("-v") {
            // `command -v X`: a presence check; the script says what it does without X.
            i += 2;
            continue;
        }
        if WRAPPERS.contains(&word) {
            // The wrapped program follows the wrapper's options and settings.
            command_position = true;
            while let Some((_, w)) = words.get(i) {
                let option_value = matches!(words[i - 1].1.as_str(), "-n" | "-S" | "-u");
                if w.starts_with('-')
                    || w.contains('=')
                    || option_value && !WRAPPERS.contains(&w.as_str())
                {
                    i += 1;
                } else {
                    break;
                }
            }
            continue;
        }
        if SHELL.contains(&word) || functions.contains(word) {
            continue;
        }
        out.push((*line, word.to_string()));
    }
    out
}

#[test]
fn ci_installs_every_program_the_tests_spawn() {
    let tools = ci_tools();
    let mut rust = Vec::new();
    for dir in ["tests", "testkit", "benches", "examples"] {
        files(&root().join(dir), "rs", &mut rust);
    }
    let mut shell = vec![root().join("tests/run.sh")];
    files(&root().join("tests/servers"), "sh", &mut shell);
    files(&root().join("tests/world"), "sh", &mut shell);
    files(&root().join("benches"), "sh", &mut shell);
    let mut found: Vec<(PathBuf, usize, String)> = Vec::new();
    for path in &rust {
        if path.ends_with(file!().rsplit('/').next().unwrap()) {
            continue; // this file names programs in its tables
        }
        found.extend(
            rust_spawns(path)
                .into_iter()
                .map(|(l, p)| (path.clone(), l, p)),
        );
    }
    for path in &shell {
        found.extend(
            shell_spawns(path)
                .into_iter()
                .map(|(l, p)| (path.clone(), l, p)),
        );
    }
    let missing: Vec<String> = found
        .iter()
        .filter(|(_, _, p)| !tools.contains_key(p) && !BASE.contains(&p.as_str()))
        .map(|(path, line, program)| {
            format!(
                "{}:{line} spawns `{program}`, which .ci/run does not install: add `{program}=<debian package>` to its `tools` list and the package to the README's install line",
                path.strip_prefix(root()).unwrap().display()
            )
        })
        .collect();
    assert!(missing.is_empty(), "\n{}\n", missing.join("\n"));
    // The spawns this test must find (so a parser that finds nothing fails).
    let programs: BTreeSet<&str> = found.iter().map(|(_, _, p)| p.as_str()).collect();
    for program in [
        "tshark", "tcpdump", "capinfos", "kdig", "knotd", "dnsdist", "openssl", "python3", "dnsjit",
    ] {
        assert!(
            programs.contains(program),
            "`{program}` not found among {programs:?}"
        );
    }
}

#[test]
fn the_readme_install_line_names_every_package() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("apt-get install knot"))
        .expect("the README's install line (`apt-get install knot ...`)");
    let named: BTreeSet<&str> = line.split(['`', ' ']).collect();
    for (program, package) in ci_tools() {
        assert!(
            named.contains(package.as_str()),
            "the README's install line lacks {package} (for {program}): {line}"
        );
    }
}

#[test]
fn the_shell_reader_finds_commands_not_arguments() {
    let script = "#!/bin/bash\nf() { tshark -r x; }\nx=(knotd dnsdist)\nif [[ -f y ]]; then nohup nice -n 10 kdig +short a; fi\n\
                  got=$(tcpdump -r f | wc -l) # openssl\ncat <<'PY'\nimport zzz\nPY\ncase $a in\n  udp) capinfos f ;;\nesac\necho \"$(dnsjit x)\"\n";
    let path = testkit::temp_path("ci-tools.sh");
    std::fs::write(&path, script).unwrap();
    let spawned: Vec<String> = shell_spawns(&path).into_iter().map(|(_, p)| p).collect();
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        spawned,
        ["tshark", "kdig", "tcpdump", "wc", "cat", "capinfos", "dnsjit"]
    );
}
