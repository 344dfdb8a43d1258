#!/usr/bin/env bash
# Our ZDNS-shaped records against ZDNS 2.1.1's own, name by name, on the
# same servers: every record type of the test zone (typed.json, asked as a
# plain query), the modules NSLOOKUP, MXLOOKUP, SPF and DMARC on knot, and
# AXFR of the world's axfr.com (ZDNS transfers from port 53 only, which the
# world's servers use; ZDNS fails the transfer from its second server, which
# is said and left out). Not a test: CI does not build ZDNS.
#
# Usage: bash tests/servers/up.sh && benches/zdns-agree.sh
#        ZDNS=/opt/zdns/zdns SKIP_BUILD=1 benches/zdns-agree.sh
#
# ZDNS: $ZDNS, else /opt/zdns/zdns, else `zdns` on the PATH; build it with
# ../shared/tools/zdns/build.sh (about a minute).
#
# Each pair of records is compared as JSON after leaving out, in every
# module's result, `duration`, `timestamp` and `error` (timing, and our own
# error texts). Differences we make on purpose (docs/lookups.md) are not
# asked: URI (ZDNS decodes no URI), ALOOKUP's default (we ask A and AAAA),
# BINDVERSION's `resolver` (ZDNS leaves it empty). Prints one line per case
# and exits 1 when any differs, with both records.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DNSLUICE_BIN:-${CARGO_TARGET_DIR:-target}/release/dnsluice}
# shellcheck source=benches/servers-env.sh
source benches/servers-env.sh
if [[ -z ${ZDNS:-} ]]; then
    if [[ -x /opt/zdns/zdns ]]; then ZDNS=/opt/zdns/zdns; else ZDNS=$(command -v zdns || true); fi
fi
[[ -n $ZDNS && -x $ZDNS ]] || { echo "no ZDNS: set ZDNS=, or run ../shared/tools/zdns/build.sh" >&2; exit 1; }
WORLD_ENV=${DNSLUICE_SERVERS_DIR:-target/test-servers}/world/world.env

# The cases: MODULE NAME NAMESERVER, one a line.
cases=$(mktemp)
trap 'rm -f "$cases"' EXIT
python3 - "$KNOT" "${DNSLUICE_SERVERS_DIR:-target/test-servers}/zones/typed.json" >"$cases" <<'PY'
import json, sys
knot, typed = sys.argv[1], sys.argv[2]
for t in json.load(open(typed)):
    if t["via"] == "query" and t["type"] != "URI":
        print(t["type"], t["name"], knot)
for module, name in [("NSLOOKUP", "lookup.test"), ("MXLOOKUP", "mx.lookup.test"),
                     ("SPF", "spf.lookup.test"), ("DMARC", "_dmarc.bad.lookup.test")]:
    print(module, name, knot)
PY
if [[ -f $WORLD_ENV ]]; then
    # shellcheck disable=SC1090
    source "$WORLD_ENV"
    echo "AXFR axfr.com ${WORLD_NET}.40.1" >>"$cases"
else
    echo "note: the world is not up (tests/world/up.sh): AXFR is not compared" >&2
fi

echo "ZDNS: $("$ZDNS" --version 2>&1 | head -1); dnsluice: $BIN"
failed=0 compared=0
while read -r module name server; do
    theirs=$(printf '%s\n' "$name" | "$ZDNS" "$module" --name-servers "$server" -q)
    ours=$(printf '%s\n' "$name" | "$BIN" lookup "$module" --name-servers "$server" --output-format zdns -q)
    compared=$((compared + 1))
    if python3 - "$theirs" "$ours" <<'PY'
import json, sys
def strip(text):
    record = json.loads(text)
    for result in record["results"].values():
        for key in ("duration", "timestamp", "error"):
            result.pop(key, None)
    return record
theirs, ours = (strip(t) for t in sys.argv[1:3])
# AXFR: ZDNS 2.1.1 writes its second transfer on the first server's closed
# connection ("use of closed network connection"): such a server is left
# out of both (and said), the others compared.
for name, result in theirs["results"].items():
    servers = result.get("data", {}).get("servers") if name == "AXFR" else None
    for failed in [s for s in servers or [] if s.get("Status") == "ERROR"]:
        print(f"  ZDNS failed at {failed['server']}: {failed.get('error')}")
        for side in (theirs, ours):
            kept = side["results"][name]["data"]["servers"]
            side["results"][name]["data"]["servers"] = [s for s in kept if s["server"] != failed["server"]]
sys.exit(0 if theirs == ours else 1)
PY
    then
        printf '%-10s %-34s equal\n' "$module" "$name"
    else
        printf '%-10s %-34s DIFFERENT\n  zdns: %s\n  ours: %s\n' "$module" "$name" "$theirs" "$ours"
        failed=$((failed + 1))
    fi
done <"$cases"
echo "$compared cases, $((compared - failed)) equal, $failed different"
((failed == 0))
