//! The `dnsluice` command.

fn main() -> std::process::ExitCode {
    dnsluice::cli::main(dnsluice::modules::registry())
}
