#!/usr/bin/env bash
# Stops the world tests/world/up.sh started (by its pid files) and removes
# world.env, so tests that need it fail loudly. Safe to rerun.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}/world
[[ -d $STATE ]] || exit 0
rm -f "$STATE/world.env"

bash "$ROOT/tests/servers/stop-pids.sh" tests/world/down.sh "$STATE"/pids/*.pid
echo "test world stopped"
