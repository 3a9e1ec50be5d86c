#!/usr/bin/env bash
# Runs the README's quickstart as a new user would: `npm start` on the default ports, then every
# ```bash block between <!-- quickstart:start --> and <!-- quickstart:end --> in README.md (the
# gateway's block, then the memory hive's: each has its own pair of markers), in order, as one
# script with `set -euo pipefail` and curl failing on any HTTP error. Then stops the platform.
# The platform gets its own database and data directory, and the hive's client command its own
# config directory, so a developer's own data and saved hive credential are untouched.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'check-quickstart: %s\n' "$*" >&2; }

export DATABASE_URL=${QUICKSTART_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/svc_platform_quickstart}
export DATA_DIR HIVE_CONFIG_DIR
DATA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/svc-quickstart.XXXXXX")
HIVE_CONFIG_DIR=$DATA_DIR/hive-client
log=$DATA_DIR/npm-start.log

for port in 8080 8090; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    say "port $port is already in use; stop what listens there (another npm start?) and run again"
    exit 1
  fi
done

blocks=$DATA_DIR/quickstart.sh
awk '/<!-- quickstart:start -->/ { on = 1; next } /<!-- quickstart:end -->/ { on = 0 } on' README.md |
  awk '/^```bash$/ { code = 1; next } /^```$/ { code = 0; next } code' >"$blocks"
[[ -s $blocks ]] || { say "README.md has no quickstart block between the markers"; exit 1; }
# Both halves are checked: a marker lost in an edit would otherwise drop one silently.
for part in 'create-developer' 'create-hive-organisation'; do
  grep -q -- "$part" "$blocks" || { say "README.md's quickstart blocks have no \`$part\` command (a marker missing?)"; exit 1; }
done

say "starting the platform (log: $log)"
setsid npm start >"$log" 2>&1 &
platform=$!
stop() {
  say "stopping the platform"
  kill -INT -- "-$platform" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$platform" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$platform" 2>/dev/null || true
  psql "${DATABASE_URL%/*}/postgres" -qc "DROP DATABASE IF EXISTS svc_platform_quickstart WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$DATA_DIR"
}
trap stop EXIT

for _ in $(seq 1 600); do
  grep -q 'The platform is up' "$log" && break
  kill -0 "$platform" 2>/dev/null || { say "npm start exited:"; tail -30 "$log" >&2; exit 1; }
  sleep 1
done
grep -q 'The platform is up' "$log" || { say "the platform did not come up in 10 minutes:"; tail -30 "$log" >&2; exit 1; }

say "running $(grep -c '' "$blocks") lines of the README's quickstart"
# A quickstart command that gets an HTTP error must fail the check, as it would puzzle a user.
curl() { command curl --fail-with-body "$@"; }
export -f curl
if ! bash -euo pipefail "$blocks"; then
  say "a quickstart command failed (above); the platform's log:"
  tail -30 "$log" >&2
  exit 1
fi
say "the quickstart works"
