//! The module reference, made from the registry: every module's options come
//! from its options struct's declaration (key, type, default, doc comment),
//! so this text cannot drift from the code. `dnsluice modules` prints it for
//! a terminal, `dnsluice modules --markdown` as `docs/modules.md` (a test
//! fails when that file is stale).

use dnsluice_core::options::{DefaultDoc, OptionDoc, Shape};
use dnsluice_core::registry::{ModuleEntry, Registry};
use std::fmt::Write as _;

/// The default as `dnsluice modules` shows it.
fn default_text(option: &OptionDoc) -> String {
    match &option.default {
        DefaultDoc::Value(v) => format!("default {v}"),
        other => other.text(),
    }
}

/// The one-line help with the range, if any.
fn help_line(option: &OptionDoc) -> String {
    let range = option.range_text();
    if range.is_empty() {
        option.help.to_string()
    } else {
        format!("{} ({range})", option.help)
    }
}

/// `dnsluice modules`: every module, and every option with its type,
/// default and help.
pub fn text(registry: &Registry) -> String {
    let mut text = String::new();
    for module in registry.iter() {
        let _ = writeln!(
            text,
            "{:<16} {:<7} {}",
            module.name,
            module.role().as_str(),
            module.summary
        );
        for option in &module.options {
            let _ = writeln!(
                text,
                "    {:<24} {:<20} {:<18} {}",
                option.key,
                option.shape.to_string(),
                default_text(option),
                help_line(option)
            );
        }
        if module.options.is_empty() {
            text.push_str("    (no options)\n");
        }
    }
    text
}

/// A table cell: `|` escaped, on one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn option_rows(out: &mut String, module: &ModuleEntry) {
    out.push_str("| key | type | default | what it does |\n|---|---|---|---|\n");
    for option in &module.options {
        let default = match &option.default {
            DefaultDoc::Value(v) => format!("`{}`", cell(&v.to_string())),
            other => other.text(),
        };
        let mut help = cell(&help_line(option));
        if !option.flag_aliases.is_empty() {
            let aliases: Vec<String> = option
                .flag_aliases
                .iter()
                .map(|a| format!("`--{a}`"))
                .collect();
            let _ = write!(help, " (command-line alias {})", aliases.join(", "));
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            option.key,
            cell(&option.shape.to_string()),
            default,
            help
        );
    }
}

fn option_details(out: &mut String, module: &ModuleEntry) {
    for option in &module.options {
        let choices = match &option.shape {
            Shape::Choice(choices) => Some(choices),
            Shape::List(inner) => match &**inner {
                Shape::Choice(choices) => Some(choices),
                _ => None,
            },
            _ => None,
        };
        if option.details.is_empty() && choices.is_none() {
            continue;
        }
        let _ = write!(out, "\n`{}`:", option.key);
        if !option.details.is_empty() {
            let _ = write!(out, " {}", option.details.replace('\n', " "));
        }
        out.push('\n');
        for choice in choices.into_iter().flatten() {
            let _ = writeln!(out, "- `{}`: {}", choice.name, choice.help);
        }
    }
}

/// `dnsluice modules --markdown`: `docs/modules.md`.
pub fn markdown(registry: &Registry) -> String {
    let mut out = String::from(
        "# Module reference\n\n\
         Made from the registry by `dnsluice modules --markdown`: every option below is\n\
         declared once, in its module's options struct, and this file is that declaration\n\
         printed (a test fails when it is stale). The same keys are the options of a\n\
         `[[stage]]` table, of a Lua `new{...}`, and, with `-` for `_`, the flags of\n\
         `dnsluice lookup` (`lookup.dns`) and `dnsluice replay` (`output.dnscli`,\n\
         `filter.timing`).\n\n\
         Durations take a unit (`\"2s\"`, `\"500ms\"`, `\"1m30s\"`); a list may be given as\n\
         one value; relative paths in a pipeline file are relative to that file.\n\n\
         | module | role | what it does |\n|---|---|---|\n",
    );
    for module in registry.iter() {
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | {} | {} |",
            module.name,
            module.name.replace('.', ""),
            module.role().as_str(),
            cell(module.summary)
        );
    }
    for module in registry.iter() {
        let _ = write!(
            out,
            "\n## `{}`\n\n{} ({}).\n\n",
            module.name,
            module.summary,
            module.role().as_str()
        );
        if module.options.is_empty() {
            out.push_str("No options.\n");
            continue;
        }
        option_rows(&mut out, module);
        option_details(&mut out, module);
    }
    out
}
