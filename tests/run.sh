#!/usr/bin/env bash
# The tests, as the README says to run them and CI runs them: starts the
# loopback DNS servers (tests/servers/up.sh), runs `cargo test --workspace`
# with any extra arguments, and stops the servers again. Servers that were
# already up before (someone ran up.sh) are left running.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${DNSLUICE_SERVERS_DIR:-target/test-servers}
if [[ ! -f $STATE/servers.env ]]; then
    trap 'bash tests/servers/down.sh' EXIT
fi
bash tests/servers/up.sh
cargo test --workspace "$@"
