# Sourced by the benchmarks that talk to the test servers: reads their
# addresses (written by tests/servers/up.sh, in $DNSLUICE_SERVERS_DIR) and
# builds the release binary unless SKIP_BUILD is set.
ENV_FILE=${DNSLUICE_SERVERS_DIR:-target/test-servers}/servers.env
[[ -f $ENV_FILE ]] || { echo "no $ENV_FILE: run bash tests/servers/up.sh first" >&2; exit 1; }
# shellcheck disable=SC1090
source "$ENV_FILE"
if [[ -z ${SKIP_BUILD:-} ]]; then
    cargo build --release --quiet
fi
