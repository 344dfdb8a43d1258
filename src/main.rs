//! The `dnsluice` command.

fn main() -> std::process::ExitCode {
    let mut registry = dnsluice::modules::registry();
    dnsluice_lua::register(&mut registry);
    dnsluice::cli::main(registry)
}
