//! Every module's options are declared once; this walks the registry and
//! checks that what each place shows agrees with what the parser takes:
//! `dnsluice modules`, `docs/modules.md`, Lua's `require(...).options`, and
//! the flags of the shortcut commands.

use dnsluice_core::options::{DefaultDoc, OptionDoc, Shape};
use dnsluice_core::registry::Registry;
use testkit::{dnsluice, run_ok};

fn registry() -> Registry {
    let mut registry = dnsluice_modules::registry();
    dnsluice_lua::register(&mut registry);
    registry
}

/// A value of `shape` the parser must take (for a required key).
fn sample(shape: &Shape) -> toml::Value {
    match shape {
        Shape::Bool => toml::Value::Boolean(true),
        Shape::Integer => toml::Value::Integer(1),
        Shape::Float => toml::Value::Float(1.0),
        Shape::Duration => toml::Value::String("1s".into()),
        Shape::Choice(choices) => toml::Value::String(choices[0].name.into()),
        Shape::List(inner) => toml::Value::Array(vec![sample(inner)]),
        Shape::Path | Shape::String | Shape::Text(_) => toml::Value::String("x".into()),
    }
}

/// A table with every documented key: its documented default, or a sample value.
fn every_key(docs: &[OptionDoc]) -> toml::Table {
    docs.iter()
        .map(|doc| {
            let value = match &doc.default {
                DefaultDoc::Value(v) => v.clone(),
                DefaultDoc::Required | DefaultDoc::Unset => sample(&doc.shape),
            };
            (doc.key.to_string(), value)
        })
        .collect()
}

#[test]
fn every_documented_key_and_default_is_what_the_parser_takes() {
    for module in registry().iter() {
        let table = every_key(&module.options);
        (module.check)(table.clone())
            .unwrap_or_else(|e| panic!("{}: documented options refused: {e}", module.name));
        // A key not in the docs is refused, by name.
        let mut extra = table.clone();
        extra.insert("not_an_option".into(), toml::Value::Boolean(true));
        let e = (module.check)(extra).expect_err(module.name);
        assert_eq!(e.key.as_deref(), Some("not_an_option"), "{}", module.name);
        // A required key left out is named.
        for doc in module
            .options
            .iter()
            .filter(|d| d.default == DefaultDoc::Required)
        {
            let mut missing = table.clone();
            missing.remove(doc.key);
            let e = (module.check)(missing).expect_err(doc.key);
            assert_eq!(
                (e.key.as_deref(), e.message.as_str()),
                (Some(doc.key), "is required"),
                "{}",
                module.name
            );
        }
    }
}

#[test]
fn the_module_reference_is_current() {
    let reference =
        String::from_utf8(run_ok(dnsluice().args(["modules", "--markdown"])).stdout).unwrap();
    let file = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/modules.md"))
        .unwrap_or_default();
    assert!(
        reference == file,
        "docs/modules.md is stale: run `cargo run -- modules --markdown > docs/modules.md`"
    );
    let text = String::from_utf8(run_ok(dnsluice().args(["modules"])).stdout).unwrap();
    for module in registry().iter() {
        assert!(
            reference.contains(&format!("## `{}`", module.name)),
            "{}",
            module.name
        );
        assert!(text.contains(module.name), "{}", module.name);
        for doc in &module.options {
            let row = format!(
                "| `{}` | {} |",
                doc.key,
                doc.shape.to_string().replace('|', "\\|")
            );
            assert!(reference.contains(&row), "{}: {row}", module.name);
            assert!(
                text.contains(&format!("    {:<24} {}", doc.key, doc.shape)),
                "{}: {}",
                module.name,
                doc.key
            );
        }
    }
}

#[test]
fn lua_lists_the_same_options() {
    let registry = registry();
    let lua = dnsluice_lua::new_state(&registry, &[]).unwrap();
    for module in registry.iter() {
        let keys: Vec<String> = lua
            .load(format!(
                "return require('dnsluice.{}').options",
                module.name
            ))
            .eval::<Vec<String>>()
            .unwrap_or_else(|e| panic!("{}: {e}", module.name));
        let documented: Vec<&str> = module.options.iter().map(|d| d.key).collect();
        assert_eq!(keys, documented, "{}", module.name);
    }
}

/// The long flags `dnsluice COMMAND --help` lists.
fn flags_of(command: &str) -> Vec<String> {
    String::from_utf8(run_ok(dnsluice().args([command, "--help"])).stdout)
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.trim_end_matches([',', '=', '['])
                .split(['=', '[', '<'])
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn shortcut_commands_take_every_option_of_their_modules_as_a_flag() {
    let registry = registry();
    for (command, modules) in [
        ("lookup", &["lookup.dns"][..]),
        ("replay", &["output.dnscli", "filter.timing"][..]),
    ] {
        let flags = flags_of(command);
        for name in modules {
            for doc in &registry.get(name).unwrap().options {
                let flag = doc.key.replace('_', "-");
                assert!(
                    flags.contains(&flag),
                    "dnsluice {command} has no --{flag} ({name}.{})",
                    doc.key
                );
            }
        }
    }
}
