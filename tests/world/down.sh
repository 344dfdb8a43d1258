#!/usr/bin/env bash
# Stops the world tests/world/up.sh started (by its pid files) and removes
# world.env, so tests that need it fail loudly. Safe to rerun.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# DNSLUICE_WORLD_WAN=1: the world behind the emulated network (world-wan).
NAME=world
[[ ${DNSLUICE_WORLD_WAN:-0} == 1 ]] && NAME=world-wan
STATE=${DNSLUICE_SERVERS_DIR:-$ROOT/target/test-servers}/$NAME
[[ -d $STATE ]] || exit 0
rm -f "$STATE/world.env"

bash "$ROOT/tests/servers/stop-pids.sh" tests/world/down.sh "$STATE"/pids/*.pid
echo "test $NAME stopped"
