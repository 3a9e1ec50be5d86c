#!/usr/bin/env bash
# Make this machine ready to run the platform, idempotently. Run by `npm start` and
# `npm test` before the TypeScript orchestrator (scripts/platform.ts).
#
#   1. npm dependencies (npm ci when node_modules is missing or stale; the lock file is never rewritten)
#   2. PostgreSQL, when DATABASE_URL points at this machine: install, start, wait
#   3. pgvector for that server (built from Debian trixie's source package), and its buffer cache
#      raised to a quarter of memory (once: a restart; SVC_TUNE_POSTGRES=0 leaves it alone)
#   4. Redis, when REDIS_URL points at this machine: install, start, wait
#   5. Temporal CLI, when TEMPORAL_ADDRESS is unset (the orchestrator runs the dev server)
#   6. Chromium (Debian's package), only for `ensure-deps.sh test`: the dashboard's browser tests
#   7. stripe-mock (Stripe's mock of its API) for the hive's card top-ups: always for tests; for
#      `npm start` when neither HIVE_STRIPE_SECRET_KEY nor HIVE_STRIPE_API_BASE is set
#
# Services this script starts are recorded, one per line, in $DATA_DIR/run/started-services:
#   postgres <major> <cluster>     e.g. "postgres 15 main"
#                                  (stop: pg_ctlcluster --skip-systemctl-redirect <major> <cluster> stop)
#   redis <port>                   e.g. "redis 6379"        (stop: redis-cli -p <port> shutdown nosave;
#                                                             pid in $DATA_DIR/run/redis.pid)
# Nothing is started when it already runs, so a second run only does cheap checks.
# Command output goes to log files ($DATA_DIR/run/logs, $SVC_CACHE_DIR/logs); only one status
# line per step is printed (stderr), plus the log tail when something fails.
set -euo pipefail

# `test` (from `npm test`) adds what only the test suite needs; no argument is `npm start`.
MODE=${1:-}
[[ -z $MODE || $MODE == test ]] || { printf 'usage: ensure-deps.sh [test]\n' >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

log() { printf 'ensure-deps: %s\n' "$*" >&2; }
die() { printf 'ensure-deps: ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Configuration: ./.env, where the process environment wins (as with Node's loadEnvFile).
# An empty variable counts as unset, as in shared/config.ts.
CONFIG_VARS=(DATABASE_URL REDIS_URL TEMPORAL_ADDRESS DATA_DIR SVC_CACHE_DIR XDG_CACHE_HOME HIVE_STRIPE_SECRET_KEY HIVE_STRIPE_API_BASE SVC_TUNE_POSTGRES)
if [[ -f .env ]]; then
  declare -A saved_env=()
  for var in "${CONFIG_VARS[@]}"; do
    if [[ -n ${!var:-} ]]; then saved_env[$var]=${!var}; fi
  done
  set -a
  # shellcheck disable=SC1091
  . ./.env
  set +a
  for var in "${!saved_env[@]}"; do
    export "$var=${saved_env[$var]}"
  done
  unset saved_env var
fi

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/svc_platform}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-}
DATA_DIR=${DATA_DIR:-.data}
SVC_CACHE_DIR=${SVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-platform}

absolute() { # path relative to the repo root -> absolute path
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) local p=${1#./}; printf '%s\n' "$ROOT/${p:-.}" ;;
  esac
}
DATA_DIR=$(absolute "$DATA_DIR")
SVC_CACHE_DIR=$(absolute "$SVC_CACHE_DIR")
RUN_DIR=$DATA_DIR/run
STARTED_FILE=$RUN_DIR/started-services
LOG_DIR=$RUN_DIR/logs
CACHE_LOG_DIR=$SVC_CACHE_DIR/logs
mkdir -p "$RUN_DIR" "$LOG_DIR" "$SVC_CACHE_DIR" "$CACHE_LOG_DIR"

SUDO=()
if [[ $EUID -ne 0 ]] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); fi

# One run at a time per machine (shared system packages, services and cache).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$SVC_CACHE_DIR/ensure-deps.lock"
  if ! flock -n 9; then
    log "waiting for another ensure-deps run to finish"
    flock -w 1800 9 || die "timed out waiting for the lock $SVC_CACHE_DIR/ensure-deps.lock"
  fi
fi

# try_logged LOGFILE CMD...: run CMD with its output appended to LOGFILE; return its status.
# (fd 9, the lock, is closed so that daemons started here do not keep holding it.)
try_logged() {
  local logfile=$1
  shift
  printf '\n=== %s: %s\n' "$(date '+%F %T')" "$*" >>"$logfile"
  "$@" >>"$logfile" 2>&1 </dev/null 9>&-
}

# die_with_log LOGFILE MESSAGE [STATUS]: print MESSAGE and the log's tail, exit.
die_with_log() {
  printf 'ensure-deps: ERROR: %s\n' "$2" >&2
  printf 'ensure-deps: last lines of %s:\n' "$1" >&2
  tail -n 40 "$1" | sed 's/^/    /' >&2
  exit "${3:-1}"
}

# run_logged LOGFILE CMD...: like try_logged, but on failure print the log's tail and exit.
run_logged() {
  local logfile=$1 rc=0
  try_logged "$@" || rc=$?
  if ((rc != 0)); then
    shift
    die_with_log "$logfile" "command failed (exit $rc): $*" "$rc"
  fi
}

record_started() { # LINE: append to started-services unless already there
  touch "$STARTED_FILE"
  grep -qxF -- "$1" "$STARTED_FILE" || printf '%s\n' "$1" >>"$STARTED_FILE"
}

percent_decode() { printf '%b' "${1//%/\\x}"; }

# parse_url URL DEFAULT_PORT: sets URL_SCHEME URL_AUTHORITY URL_QUERY URL_USER URL_PASS
# URL_HOST URL_PORT. Handles scheme://[user[:pass]@]host[:port][/path][?query], [v6] hosts,
# percent-encoded socket directories, and libpq's ?host=/?port= parameters. Multi-host
# URLs use their first host.
parse_url() {
  local url=$1 default_port=$2 rest userinfo hostport param key value
  URL_SCHEME="" URL_QUERY="" URL_USER="" URL_PASS="" URL_HOST="" URL_PORT=""
  if [[ $url == *://* ]]; then URL_SCHEME=${url%%://*}; rest=${url#*://}; else rest=$url; fi
  rest=${rest%%#*}
  if [[ $rest == *\?* ]]; then URL_QUERY=${rest#*\?}; rest=${rest%%\?*}; fi
  URL_AUTHORITY=${rest%%/*}
  if [[ $URL_AUTHORITY == *@* ]]; then
    userinfo=${URL_AUTHORITY%@*}
    hostport=${URL_AUTHORITY##*@}
    URL_USER=$(percent_decode "${userinfo%%:*}")
    if [[ $userinfo == *:* ]]; then URL_PASS=$(percent_decode "${userinfo#*:}"); fi
  else
    hostport=$URL_AUTHORITY
  fi
  hostport=${hostport%%,*}
  if [[ $hostport == \[* ]]; then
    URL_HOST=${hostport#\[}
    URL_HOST=${URL_HOST%%\]*}
    rest=${hostport#*\]}
    [[ $rest == :* ]] && URL_PORT=${rest#:}
  elif [[ $hostport == *:* ]]; then
    URL_HOST=${hostport%:*}
    URL_PORT=${hostport##*:}
  else
    URL_HOST=$hostport
  fi
  URL_HOST=$(percent_decode "$URL_HOST")
  if [[ -n $URL_QUERY ]]; then
    local IFS='&'
    for param in $URL_QUERY; do
      key=${param%%=*}
      value=$(percent_decode "${param#*=}")
      case $key in
        host) [[ -n $value ]] && URL_HOST=${value%%,*} ;;
        port) [[ -n $value ]] && URL_PORT=${value%%,*} ;;
      esac
    done
  fi
  URL_PORT=${URL_PORT:-$default_port}
  [[ $URL_PORT =~ ^[0-9]+$ ]] || die "cannot parse the port of '$url'"
}

is_local_host() {
  case $1 in
    "" | 127.0.0.1 | localhost | ::1 | /*) return 0 ;;
    *) return 1 ;;
  esac
}

export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-o DPkg::Lock::Timeout=120 -o APT::Get::Assume-Yes=true)
APT_LOG=$CACHE_LOG_DIR/apt.log
APT_UPDATED=0

# apt_install PKG...: install the packages that are not installed yet (no recommends).
apt_install() {
  local missing=() pkg out
  for pkg in "$@"; do
    out=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $out == "install ok installed" ]] || missing+=("$pkg")
  done
  ((${#missing[@]} > 0)) || return 0
  if ((APT_UPDATED == 0)); then
    for pkg in "${missing[@]}"; do
      out=$(apt-cache policy "$pkg" 2>/dev/null || true)
      if [[ ! $out =~ Candidate:\ [^\(] ]]; then
        log "apt-get update (no candidate for $pkg)"
        run_logged "$APT_LOG" "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update
        APT_UPDATED=1
        break
      fi
    done
  fi
  log "apt-get install ${missing[*]}"
  run_logged "$APT_LOG" "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install -y --no-install-recommends "${missing[@]}"
}

# ---------------------------------------------------------------------------------------------
# 1. npm dependencies
lock_digest() { sha256sum package-lock.json | cut -d' ' -f1; }

step_npm() {
  command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
  local reason=""
  if [[ ! -d node_modules ]]; then
    reason="node_modules missing"
  elif [[ ! -f package-lock.json ]]; then
    reason="package-lock.json missing"
  elif [[ ! -f node_modules/.package-lock.json ]]; then
    reason="node_modules/.package-lock.json missing"
  elif [[ "$(lock_digest)" != "$(cat node_modules/.svc-installed-lock 2>/dev/null)" ]]; then
    # By content, not modification time: a fresh checkout or a second worktree of the same lock
    # file is not a change.
    reason="package-lock.json changed"
  fi
  if [[ -z $reason ]]; then
    log "npm dependencies up to date"
    return
  fi
  local npmlog=$LOG_DIR/npm.log
  : >"$npmlog"
  # npm ci installs exactly the committed lock file and never rewrites it; a lock file it refuses
  # is a defect to fix in the repository (npm install, commit), not something to paper over here.
  [[ -f package-lock.json ]] || die "package-lock.json is missing; run npm install and commit it"
  log "npm dependencies: npm ci ($reason)"
  try_logged "$npmlog" npm ci --no-audit --no-fund || die_with_log "$npmlog" "npm ci failed (if it says the lock file is out of sync, run npm install and commit package-lock.json)"
  # Record which lock file this install is, so the next run does not reinstall.
  lock_digest >node_modules/.svc-installed-lock
  log "npm dependencies installed"
}

# ---------------------------------------------------------------------------------------------
# 2. PostgreSQL
PG_LOCAL=0
PG_MAJOR=""

pg_ready() {
  local args=(-q -p "$URL_PORT" -t 3)
  [[ -n $URL_HOST ]] && args+=(-h "$URL_HOST")
  pg_isready "${args[@]}" >/dev/null 2>&1
}

# Waits up to 30 s for the cluster to accept connections; dies with the end of its log if it does not.
wait_pg_ready() { # major cluster what
  local i
  for ((i = 0; i < 60; i++)); do
    pg_ready && return
    sleep 0.5
  done
  local pglog=/var/log/postgresql/postgresql-$1-$2.log
  [[ -r $pglog ]] && tail -n 20 "$pglog" | sed 's/^/    /' >&2
  die "PostgreSQL $1/$2 does not accept connections on ${URL_HOST:-<socket>}:$URL_PORT 30 s after its $3"
}

# "major cluster status" of the local cluster listening on the URL's port (empty if none).
pg_cluster_for_port() {
  pg_lsclusters -h 2>/dev/null | awk -v port="$URL_PORT" '$3 == port { print $1, $2, $4; exit }'
}

step_postgres() {
  parse_url "$DATABASE_URL" 5432
  if ! is_local_host "$URL_HOST"; then
    log "PostgreSQL at $URL_HOST:$URL_PORT is external, not managed here"
    return
  fi
  PG_LOCAL=1
  if command -v pg_isready >/dev/null 2>&1 && pg_ready; then
    log "PostgreSQL running on port $URL_PORT"
    return
  fi
  # pg_lsclusters alone (postgresql-common) also comes with the client: check for a server too.
  if ! command -v pg_lsclusters >/dev/null 2>&1 || ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
    apt_install postgresql
    command -v pg_lsclusters >/dev/null 2>&1 || die "pg_lsclusters still missing after installing postgresql"
  fi
  command -v pg_isready >/dev/null 2>&1 || apt_install postgresql-client
  if pg_ready; then # started by the package's install scripts
    log "PostgreSQL running on port $URL_PORT"
    return
  fi

  local line major cluster status
  line=$(pg_cluster_for_port)
  if [[ -z $line ]]; then
    if [[ -z $(pg_lsclusters -h 2>/dev/null) ]]; then
      # Server binaries but no cluster at all: create the default one on the URL's port.
      major=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -n | tail -n 1)
      [[ -n $major ]] || die "no PostgreSQL server binaries under /usr/lib/postgresql"
      log "creating PostgreSQL cluster $major/main on port $URL_PORT"
      run_logged "$CACHE_LOG_DIR/postgres.log" "${SUDO[@]}" pg_createcluster "$major" main -p "$URL_PORT"
      line=$(pg_cluster_for_port)
    fi
    [[ -n $line ]] || die "no local PostgreSQL cluster uses port $URL_PORT (DATABASE_URL); clusters: $(pg_lsclusters -h 2>/dev/null | awk '{printf "%s/%s:%s ", $1, $2, $3}')"
  fi
  read -r major cluster status <<<"$line"
  if [[ $status != online* ]]; then
    log "starting PostgreSQL $major/$cluster on port $URL_PORT"
    run_logged "$CACHE_LOG_DIR/postgres.log" "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$major" "$cluster" start
    record_started "postgres $major $cluster"
  fi
  wait_pg_ready "$major" "$cluster" start
  log "PostgreSQL $major/$cluster started"
}

# ---------------------------------------------------------------------------------------------
# 3. pgvector
pg_server_major() {
  local maint num
  # The same URL with the maintenance database (svc_platform may not exist yet).
  maint="${URL_SCHEME:-postgres}://$URL_AUTHORITY/postgres${URL_QUERY:+?$URL_QUERY}"
  if num=$(PGCONNECT_TIMEOUT=5 psql -X -w -Atc 'show server_version_num' "$maint" 2>/dev/null) && [[ $num =~ ^[0-9]+$ ]]; then
    printf '%s\n' $((num / 10000))
    return
  fi
  local line
  line=$(pg_cluster_for_port)
  [[ -n $line ]] || return 1
  printf '%s\n' "${line%% *}"
}

# Mirror URI and Signed-By of the configured main Debian (bookworm) repository.
debian_mirror() {
  local uri="" signed="" f
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    # deb822: the stanza of Types deb whose Suites contain exactly "bookworm".
    read -r uri signed < <(awk '
      function flush() {
        if (!done && is_deb && has_suite && uri != "") { print uri, (signed == "" ? "-" : signed); done = 1 }
        is_deb = 0; has_suite = 0; uri = ""; signed = ""
      }
      /^[[:space:]]*$/ { flush(); next }
      /^#/ { next }
      tolower($1) == "types:"     { for (i = 2; i <= NF; i++) if ($i == "deb") is_deb = 1 }
      tolower($1) == "suites:"    { for (i = 2; i <= NF; i++) if ($i == "bookworm") has_suite = 1 }
      tolower($1) == "uris:"      { uri = $2 }
      tolower($1) == "signed-by:" { signed = $2 }
      END { flush() }' /etc/apt/sources.list.d/debian.sources) || true
  fi
  if [[ -z $uri ]]; then
    # One-line format: deb [options] URI bookworm components
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -f $f ]] || continue
      read -r uri signed < <(awk '
        $1 == "deb" {
          s = "-"; i = 2
          if ($2 ~ /^\[/) {
            for (; i <= NF; i++) {
              o = $i; gsub(/[][]/, "", o)
              if (o ~ /^signed-by=/) s = substr(o, 11)
              if ($i ~ /\]$/) { i++; break }
            }
          }
          if ($(i + 1) == "bookworm") { print $i, s; exit }
        }' "$f") || true
      [[ -n $uri ]] && break
    done
  fi
  [[ -n $uri ]] || return 1
  if [[ -z $signed || $signed == - ]]; then
    signed=""
    [[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] && signed=/usr/share/keyrings/debian-archive-keyring.gpg
  fi
  printf '%s %s\n' "$uri" "${signed:--}"
}

step_pgvector() {
  if ((PG_LOCAL == 0)); then
    log "pgvector not managed (external PostgreSQL)"
    return
  fi
  PG_MAJOR=$(pg_server_major) || die "cannot determine the PostgreSQL server version"
  local control=/usr/share/postgresql/$PG_MAJOR/extension/vector.control
  local library=/usr/lib/postgresql/$PG_MAJOR/lib/vector.so
  if [[ -f $control && -f $library ]]; then
    log "pgvector present (PostgreSQL $PG_MAJOR)"
    return
  fi
  log "pgvector missing for PostgreSQL $PG_MAJOR: building it from Debian trixie's source package"

  local mirror uri signed
  mirror=$(debian_mirror) || die "cannot find the Debian mirror (bookworm) in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
  read -r uri signed <<<"$mirror"
  local list=/etc/apt/sources.list.d/svc-pgvector-src.sources content
  content="# Added by svc-platform scripts/ensure-deps.sh to build pgvector from source.
Types: deb-src
URIs: $uri
Suites: trixie
Components: main"
  [[ $signed != - ]] && content+=$'\n'"Signed-By: $signed"
  if [[ ! -f $list || $(<"$list") != "$content" ]]; then
    printf '%s\n' "$content" | "${SUDO[@]}" tee "$list" >/dev/null
  fi

  apt_install "postgresql-server-dev-$PG_MAJOR" dpkg-dev build-essential

  # Refresh only the pgvector source list; keep the other lists (List-Cleanup=0).
  log "apt-get update (trixie deb-src only)"
  run_logged "$APT_LOG" "${SUDO[@]}" apt-get "${APT_OPTS[@]}" \
    -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update

  local srcroot=$SVC_CACHE_DIR/src/pgvector srcdir
  mkdir -p "$srcroot"
  srcdir=$(find "$srcroot" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | sort -V | tail -n 1)
  if [[ -z $srcdir || ! -f $srcdir/Makefile || ! -f $srcdir/.svc-complete ]]; then
    rm -rf "${srcroot:?}"/*
    log "apt-get source pgvector/trixie"
    (cd "$srcroot" && run_logged "$CACHE_LOG_DIR/pgvector.log" apt-get "${APT_OPTS[@]}" source pgvector/trixie)
    srcdir=$(find "$srcroot" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | sort -V | tail -n 1)
    [[ -n $srcdir && -f $srcdir/Makefile ]] || die "apt-get source pgvector did not unpack a source tree into $srcroot"
    touch "$srcdir/.svc-complete"
  fi

  local pg_config=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
  [[ -x $pg_config ]] || die "$pg_config missing"
  # OPTFLAGS= as in Debian's own build: no -march=native, so the library runs on any x86-64.
  log "building $(basename "$srcdir") for PostgreSQL $PG_MAJOR"
  run_logged "$CACHE_LOG_DIR/pgvector.log" make -C "$srcdir" -j"$(nproc 2>/dev/null || echo 2)" PG_CONFIG="$pg_config" OPTFLAGS=
  run_logged "$CACHE_LOG_DIR/pgvector.log" "${SUDO[@]}" make -C "$srcdir" install PG_CONFIG="$pg_config" OPTFLAGS=
  [[ -f $control && -f $library ]] || die "pgvector installed, but $control or $library is missing (see $CACHE_LOG_DIR/pgvector.log)"
  log "pgvector installed (PostgreSQL $PG_MAJOR)"
}

# Vector search walks its HNSW graph page by page. PostgreSQL ships with shared_buffers at 128MB,
# smaller than one brain's graph of 100,000 entries of 1,536 dimensions (391 MB), and a draw of
# 256 candidates whose pages came from outside that cache took 14 to 85 ms against 10 to 12 ms
# from inside it (2026-11-27, bench database). pgvector's tuning advice is PostgreSQL's usual, a
# quarter of memory. A local cluster below that is raised once, before anything of the platform
# connects: ALTER SYSTEM, then a restart. If the server will not start so, the old size is put back.
step_postgres_memory() {
  ((PG_LOCAL == 1)) || return 0
  if [[ ${SVC_TUNE_POSTGRES:-1} == 0 ]]; then
    log "PostgreSQL's shared_buffers left as configured (SVC_TUNE_POSTGRES=0)"
    return
  fi
  local maint current_mb target_mb datadir line major cluster status
  maint="${URL_SCHEME:-postgres}://$URL_AUTHORITY/postgres${URL_QUERY:+?$URL_QUERY}"
  current_mb=$(psql -X -w -Atc "select setting::bigint * 8 / 1024 from pg_settings where name = 'shared_buffers'" "$maint") || die "cannot read PostgreSQL's shared_buffers"
  target_mb=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) / 1024 / 4))
  if ((current_mb * 10 >= target_mb * 9)); then
    log "PostgreSQL's shared_buffers ${current_mb}MB"
    return
  fi
  line=$(pg_cluster_for_port)
  if [[ -z $line ]]; then
    log "PostgreSQL's shared_buffers is ${current_mb}MB (a quarter of memory is ${target_mb}MB); no local cluster on port $URL_PORT to restart, left as it is"
    return
  fi
  read -r major cluster status <<<"$line"
  datadir=$(psql -X -w -Atc 'show data_directory' "$maint")
  log "raising PostgreSQL's shared_buffers from ${current_mb}MB to ${target_mb}MB (a quarter of memory): restarting $major/$cluster"
  psql -X -w -q -c "ALTER SYSTEM SET shared_buffers = '${target_mb}MB'" "$maint" >/dev/null
  if ! try_logged "$CACHE_LOG_DIR/postgres.log" "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$major" "$cluster" restart; then
    log "PostgreSQL did not start with shared_buffers ${target_mb}MB: putting back ${current_mb}MB"
    "${SUDO[@]}" sed -i "s/^shared_buffers = .*/shared_buffers = '${current_mb}MB'/" "$datadir/postgresql.auto.conf"
    run_logged "$CACHE_LOG_DIR/postgres.log" "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$major" "$cluster" start
  fi
  wait_pg_ready "$major" "$cluster" restart
  log "PostgreSQL's shared_buffers $(psql -X -w -Atc 'show shared_buffers' "$maint")"
}

# Each PostgreSQL backend maps shared memory page by page as it first touches it. With 4 KB pages
# a connection's first search of a 100,000-entry graph spent most of its time mapping: 80 to 92 ms
# for 256 candidates against 8 to 14 ms on the same connection after; with 2 MB pages, 9 to 10.5 ms
# (2026-11-27, bench database, a new psql session per search). Pooled connections each pay this,
# so recall stayed slow until every connection had touched every page. PostgreSQL takes huge pages
# by itself (huge_pages = try) when the kernel has reserved enough before it starts: the pages are
# reserved (vm.nr_hugepages, when this user may write it) and the cluster restarted once.
hugepages_in_use() { # prints the huge pages taken or promised (PostgreSQL maps them at its start)
  awk '/^HugePages_Total:/ { total = $2 } /^HugePages_Free:/ { free = $2 } /^HugePages_Rsvd:/ { rsvd = $2 } END { print total - free + rsvd }' /proc/meminfo
}

step_postgres_huge_pages() {
  ((PG_LOCAL == 1)) || return 0
  [[ ${SVC_TUNE_POSTGRES:-1} == 0 ]] && return 0
  [[ -r /proc/sys/vm/nr_hugepages ]] || return 0
  local maint needed reserved line major cluster status
  maint="${URL_SCHEME:-postgres}://$URL_AUTHORITY/postgres${URL_QUERY:+?$URL_QUERY}"
  needed=$(psql -X -w -Atc 'show shared_memory_size_in_huge_pages' "$maint" 2>/dev/null) || return 0
  [[ $needed =~ ^[0-9]+$ ]] && ((needed > 0)) || return 0
  if (($(hugepages_in_use) >= needed)); then
    log "PostgreSQL's shared memory in huge pages ($needed of 2 MB)"
    return
  fi
  line=$(pg_cluster_for_port)
  if [[ -z $line ]]; then
    log "PostgreSQL's shared memory is not in huge pages; no local cluster on port $URL_PORT to restart, left as it is"
    return
  fi
  reserved=$(cat /proc/sys/vm/nr_hugepages)
  if ((reserved < needed)); then
    echo "$needed" | "${SUDO[@]}" tee /proc/sys/vm/nr_hugepages >/dev/null 2>&1 || true
    reserved=$(cat /proc/sys/vm/nr_hugepages)
  fi
  if ((reserved < needed)); then
    log "PostgreSQL's shared memory is not in huge pages: $needed are needed and the kernel holds $reserved (vm.nr_hugepages); left as it is"
    return
  fi
  read -r major cluster status <<<"$line"
  log "reserved $needed huge pages for PostgreSQL's shared memory: restarting $major/$cluster"
  run_logged "$CACHE_LOG_DIR/postgres.log" "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$major" "$cluster" restart
  wait_pg_ready "$major" "$cluster" restart
  if (($(hugepages_in_use) >= needed)); then log "PostgreSQL's shared memory in huge pages ($needed of 2 MB)"; else log "PostgreSQL did not take the huge pages; its shared memory stays in 4 KB pages"; fi
}

# ---------------------------------------------------------------------------------------------
# 4. Redis
redis_ping() { # prints the reply
  local args=(-h "${URL_HOST:-127.0.0.1}" -p "$URL_PORT")
  if [[ -n $URL_PASS ]]; then
    [[ -n $URL_USER ]] && args+=(--user "$URL_USER")
  fi
  REDISCLI_AUTH=$URL_PASS timeout 5 redis-cli "${args[@]}" ping 2>&1 || true
}

step_redis() {
  if [[ $REDIS_URL == unix:* || $REDIS_URL == redis+unix:* || $REDIS_URL == /* ]]; then
    log "Redis via a unix socket ($REDIS_URL), not managed here"
    return
  fi
  parse_url "$REDIS_URL" 6379
  if ! is_local_host "$URL_HOST" || [[ $URL_HOST == /* ]]; then
    log "Redis at $URL_HOST:$URL_PORT is external, not managed here"
    return
  fi
  local reply=""
  command -v redis-cli >/dev/null 2>&1 && reply=$(redis_ping)
  if [[ $reply != *PONG* && $reply != *NOAUTH* && $reply != *WRONGPASS* && $reply != *LOADING* ]] &&
    { ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; }; then
    apt_install redis-server
    reply=$(redis_ping)
  fi
  case $reply in
    *PONG*)
      log "Redis running on port $URL_PORT"
      return
      ;;
    *NOAUTH* | *WRONGPASS* | *LOADING*)
      log "Redis running on port $URL_PORT (reply: ${reply%%$'\n'*})"
      return
      ;;
  esac

  log "starting Redis on port $URL_PORT"
  mkdir -p "$DATA_DIR/redis"
  local redislog=$RUN_DIR/redis.log
  run_logged "$redislog" redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$URL_PORT" \
    --save "" --appendonly no --dir "$DATA_DIR/redis" \
    --pidfile "$RUN_DIR/redis.pid" --logfile "$redislog"
  local i
  for ((i = 0; i < 40; i++)); do
    reply=$(redis_ping)
    [[ $reply == *PONG* ]] && break
    sleep 0.25
  done
  if [[ $reply != *PONG* ]]; then
    tail -n 20 "$redislog" 2>/dev/null | sed 's/^/    /' >&2
    die "Redis on port $URL_PORT does not answer PING after 10 s (log: $redislog)"
  fi
  record_started "redis $URL_PORT"
  log "Redis started on port $URL_PORT"
}

# go_install_cached NAME MODULE VERSION WHY: `go install MODULE@VERSION` into $SVC_CACHE_DIR/bin/NAME,
# through a temporary GOBIN so that a half-written binary is never found there. WHY completes the
# error when Go is missing ("to install …").
go_install_cached() {
  local name=$1 module=$2 version=$3 why=$4 go tmpbin
  go=$(command -v go 2>/dev/null || true)
  [[ -z $go && -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go
  [[ -n $go ]] || die "Go is needed $why (not on PATH, not at /usr/local/go/bin/go)"
  mkdir -p "$SVC_CACHE_DIR/bin"
  tmpbin=$(mktemp -d "$SVC_CACHE_DIR/bin/.install.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$tmpbin'" EXIT
  run_logged "$CACHE_LOG_DIR/$name-install.log" env GOBIN="$tmpbin" "$go" install "$module@$version"
  mv -f "$tmpbin/$name" "$SVC_CACHE_DIR/bin/$name"
  rm -rf "$tmpbin"
  trap - EXIT
}

# ---------------------------------------------------------------------------------------------
# 5. Temporal CLI
TEMPORAL_CLI_MODULE=github.com/temporalio/cli/cmd/temporal
TEMPORAL_CLI_VERSION=v1.5.1  # later versions cannot be installed with `go install`

temporal_ok() { [[ -x $1 ]] && "$1" --version >/dev/null 2>&1; }

step_temporal() {
  if [[ -n $TEMPORAL_ADDRESS ]]; then
    log "Temporal CLI not needed (TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS)"
    return
  fi
  local bin=$SVC_CACHE_DIR/bin/temporal
  if temporal_ok "$bin"; then
    log "Temporal CLI present ($("$bin" --version 2>/dev/null | head -n 1))"
    return
  fi
  # Another `go install` of the CLI (e.g. started by hand) may be writing it right now.
  if pgrep -f "go install $TEMPORAL_CLI_MODULE" >/dev/null 2>&1; then
    log "waiting for a running 'go install' of the Temporal CLI"
    local i
    for ((i = 0; i < 1800; i++)); do
      pgrep -f "go install $TEMPORAL_CLI_MODULE" >/dev/null 2>&1 || break
      sleep 1
    done
    if temporal_ok "$bin"; then
      log "Temporal CLI present ($("$bin" --version 2>/dev/null | head -n 1))"
      return
    fi
  fi

  log "installing Temporal CLI $TEMPORAL_CLI_VERSION with go install (takes a few minutes)"
  go_install_cached temporal "$TEMPORAL_CLI_MODULE" "$TEMPORAL_CLI_VERSION" "to install the Temporal CLI; or set TEMPORAL_ADDRESS"
  temporal_ok "$bin" || die "$bin --version fails after go install"
  log "Temporal CLI installed ($("$bin" --version 2>/dev/null | head -n 1))"
}

# ---------------------------------------------------------------------------------------------
# 6. Chromium, for the dashboard tests (playwright-core drives it; no browser download works here)
CHROMIUM=/usr/bin/chromium

step_chromium() {
  if [[ -x $CHROMIUM ]]; then
    log "Chromium present ($CHROMIUM)"
    return
  fi
  apt_install chromium
  [[ -x $CHROMIUM ]] || die "the chromium package is installed, but $CHROMIUM is missing"
  log "Chromium installed ($CHROMIUM)"
}

# ---------------------------------------------------------------------------------------------
# 7. stripe-mock: Stripe, which tests (and a developer machine) cannot or should not reach, stood in
#    for by its official mock server; scripts/lib/local-services.ts starts it
STRIPE_MOCK_MODULE=github.com/stripe/stripe-mock
STRIPE_MOCK_VERSION=v0.203.0

step_stripe_mock() {
  if [[ $MODE != test && ( -n ${HIVE_STRIPE_SECRET_KEY:-} || -n ${HIVE_STRIPE_API_BASE:-} ) ]]; then
    log "stripe-mock not needed (HIVE_STRIPE_SECRET_KEY or HIVE_STRIPE_API_BASE is set)"
    return
  fi
  local bin=$SVC_CACHE_DIR/bin/stripe-mock
  # The binary says only "master" for its version: the installed version is kept beside it.
  local marker=$bin.version
  if [[ -x $bin && "$(cat "$marker" 2>/dev/null)" == "$STRIPE_MOCK_VERSION" ]]; then
    log "stripe-mock present ($STRIPE_MOCK_VERSION)"
    return
  fi
  log "installing stripe-mock $STRIPE_MOCK_VERSION with go install (takes a few minutes the first time)"
  go_install_cached stripe-mock "$STRIPE_MOCK_MODULE" "$STRIPE_MOCK_VERSION" "to install stripe-mock"
  printf '%s\n' "$STRIPE_MOCK_VERSION" >"$marker"
  log "stripe-mock installed ($STRIPE_MOCK_VERSION)"
}

step_npm
step_postgres
step_pgvector
step_postgres_memory
step_postgres_huge_pages
step_redis
step_temporal
if [[ $MODE == test ]]; then step_chromium; fi
step_stripe_mock
