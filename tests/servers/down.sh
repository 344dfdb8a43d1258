#!/usr/bin/env bash
# Stops the servers tests/servers/up.sh started (by their pid files) and
# removes servers.env, so tests that need them fail loudly.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}
[[ -d $STATE ]] || exit 0
rm -f "$STATE/servers.env"
bash "$ROOT/tests/world/down.sh"  # the simulated internet
DNSLUICE_WORLD_WAN=1 bash "$ROOT/tests/world/down.sh"

bash "$ROOT/tests/servers/stop-pids.sh" tests/servers/down.sh "$STATE"/*.pid
echo "test DNS servers stopped"
