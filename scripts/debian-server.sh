# scripts/debian-server.sh — what scripts/mysql-server and scripts/mariadb-server share: fetch a
# database server from Debian's unstable suite with a PRIVATE apt state, unpack it into a private
# root, run it through the unpacked dynamic loader, start and stop it. Sourced, never run.
#
# Why one file: the two servers differ only in package names, binary names, the way a new data
# directory is made and a few server options; everything else (the apt state, the dependency
# closure, the loader, the pid file, the waiting) is the same and must stay the same.
#
# The sourcing script sets, before `source`:
#   NAME          its own name, for messages ("mysql-server")
#   PRODUCT       what it runs, for messages ("MySQL")
#   ENV_PREFIX    prefix of its environment variables ("PYFSM_MYSQL": PYFSM_MYSQL_PORT, ...)
#   DEFAULT_PORT  its port unless ${ENV_PREFIX}_PORT says another
#   CACHE_NAME    the folder under ~/.cache ("pyfsm-mysql")
#   SERIES        the version it promises ("9.7"): a suite that carries another is refused, so
#                 that the version the docs name is the version the tests ran on
#   PACKAGES      the server and client packages to fetch ("mysql-server-core mysql-client-core")
#   SERVER_BIN CLIENT_BIN   paths inside the root (/usr/sbin/mysqld, /usr/bin/mysql)
#   CLIENT_OPTS   (an array, may be empty) options its client needs on every call
# and defines two functions:
#   server_opts   appends to the array SERVER its flavour's options (paths into the root)
#   initialize    makes a new data directory $DATA (output to $RUN/init.log)
# then calls `main "$@"`.
#
# It never writes to /etc/apt, never runs `apt-get install`, never changes system libraries.

env_or() { local v="${ENV_PREFIX}_$1"; printf '%s' "${!v:-$2}"; }

PORT=$(env_or PORT "$DEFAULT_PORT")
CACHE=$(env_or CACHE "${HOME:-/root}/.cache/$CACHE_NAME")
RUN=$(env_or RUN "/tmp/$CACHE_NAME-$PORT")
SUITE=$(env_or SUITE sid)
ROOT=$CACHE/root
APTDIR=$CACHE/apt
DEBS=$CACHE/debs
DATA=$RUN/data
SOCK=$RUN/server.sock
PIDFILE=$RUN/server.pid
ERRLOG=$RUN/server.err
DSN="mysql://root@127.0.0.1:$PORT/test"
# Packages of the closure left out: maintainer-script and packaging tools the binaries never load.
EXCLUDE='^(perl|perl-base|perl-modules-.*|libperl.*|debconf|debconf-2[.]0|cdebconf|dpkg|install-info|adduser|passwd|init-system-helpers|lsb-base|sensible-utils|mysql-common|mariadb-common|psmisc|procps)$'

say() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { printf '%s: ERROR: %s\n' "$NAME" "$*" >&2; exit 1; }

case "$(uname -m)" in
  x86_64)  TRIPLET=x86_64-linux-gnu;  LOADER_NAME=ld-linux-x86-64.so.2 ;;
  aarch64) TRIPLET=aarch64-linux-gnu; LOADER_NAME=ld-linux-aarch64.so.1 ;;
  *) die "unsupported machine $(uname -m)" ;;
esac
LOADER=$ROOT/usr/lib/$TRIPLET/$LOADER_NAME
LIBPATH=$ROOT/usr/lib/$TRIPLET
[ -d "$ROOT/lib/$TRIPLET" ] && LIBPATH=$LIBPATH:$ROOT/lib/$TRIPLET

# Run a binary of the private root through its own loader and libraries.
run_bin() { local bin=$1; shift; "$LOADER" --library-path "$LIBPATH" "$ROOT$bin" "$@"; }
client() { run_bin "$CLIENT_BIN" --no-defaults --protocol=TCP -h127.0.0.1 -P"$PORT" -uroot "${CLIENT_OPTS[@]}" "$@"; }
# (the client, not mysqladmin: mariadb-client-core has no mariadb-admin)
ping_server() { client --connect-timeout=2 -N -e 'SELECT 1' >/dev/null 2>&1; }

# The Debian archive the machine's own apt sources name (deb822 .sources or one-line .list).
debian_mirror() {
  local mirror; mirror=$(env_or MIRROR "")
  if [ -n "$mirror" ]; then echo "$mirror"; return; fi
  local f u
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    if [[ $f == *.sources ]]; then
      u=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f")
    else
      u=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' "$f")
    fi
    u=$(printf '%s\n' "$u" | grep -E '^https?://[^ ]*/debian/?$' | head -n1 || true)
    if [ -n "$u" ]; then echo "${u%/}"; return; fi
  done
  echo "http://deb.debian.org/debian"
}

APT_OPTS=()
apt_setup() {
  mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
  printf 'deb %s %s main\n' "$(debian_mirror)" "$SUITE" >"$APTDIR/sources.list"
  local arch; arch=$(dpkg --print-architecture)
  APT_OPTS=(-o "Dir::Etc::SourceList=$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::Cache=$APTDIR/cache"
            -o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -o Acquire::Languages=none
            -o APT::Sandbox::User=root)
}

# The dependency closure of $PACKAGES, not going through EXCLUDE.
closure() {
  # shellcheck disable=SC2086
  apt-cache "${APT_OPTS[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances $PACKAGES |
  awk -v ex="$EXCLUDE" -v roots="$PACKAGES" '
    /^[^ ]/          { cur = $1; next }
    /^ *\|?(Pre)?Depends: / { d = $2; if (d ~ /^</) { virt = 1 } else { virt = 0; edge[cur] = edge[cur] " " d }; next }
    /^    [^ ]/      { if (virt) edge[cur] = edge[cur] " " $1; next }
    END {
      n = split(roots, q, " ")
      for (i = 1; i <= n; i++) seen[q[i]] = 1
      for (h = 1; h <= n; h++) {
        m = split(edge[q[h]], ds, " ")
        for (j = 1; j <= m; j++) { p = ds[j]; sub(/:any$/, "", p)
          if (p ~ ex || (p in seen)) continue
          seen[p] = 1; q[++n] = p }
      }
      for (i = 1; i <= n; i++) print q[i]
    }'
}

do_fetch() {
  local force=${1:-} server_pkg=${PACKAGES%% *}
  mkdir -p "$CACHE"
  exec 8>"$CACHE/.lock"; flock 8
  if [ -z "$force" ] && [ -f "$ROOT/.complete" ]; then return 0; fi
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "apt-get and dpkg-deb are needed (a Debian machine)"
  apt_setup
  say "fetching $PRODUCT from $(cat "$APTDIR/sources.list") into $CACHE"
  { apt-get "${APT_OPTS[@]}" -qq update >"$APTDIR/update.log" 2>&1 &&
    ! grep -qE 'Failed to fetch|index files failed' "$APTDIR/update.log"; } ||
    die "download failed: 'apt-get update' of Debian $SUITE from $(debian_mirror) failed (see $APTDIR/update.log): $(grep -E '^(E|W):' "$APTDIR/update.log" | head -n3 | tr '\n' ' ')"
  local pkgs; pkgs=$(closure) || die "could not compute the package closure (is $server_pkg in $SUITE?)"
  grep -qx "$server_pkg" <<<"$pkgs" || die "$server_pkg not found in Debian $SUITE"
  rm -rf "$DEBS"; mkdir -p "$DEBS"
  # shellcheck disable=SC2086
  (cd "$DEBS" && apt-get "${APT_OPTS[@]}" -q download $pkgs) >"$APTDIR/download.log" 2>&1 ||
    die "download failed: 'apt-get download' of $(wc -w <<<"$pkgs") packages from $(debian_mirror) (see $APTDIR/download.log): $(grep -E '^(E|W):' "$APTDIR/download.log" | head -n3 | tr '\n' ' ')"
  # the server package's version (its file name: name_[epoch%3a]version_arch.deb) before unpacking
  local found; found=$(cd "$DEBS" && ls "${server_pkg}"_*.deb | sed -e 's/^[^_]*_//' -e 's/^[0-9]*%3[aA]//' -e 's/_.*//')
  [[ $found == "$SERIES".* ]] ||
    die "Debian $SUITE carries $server_pkg $found, not $PRODUCT $SERIES, the version pyfsm's tests and docs name (${ENV_PREFIX}_SUITE names another suite)"
  say "unpacking $(ls "$DEBS"/*.deb | wc -l) packages ($(du -sh "$DEBS" | cut -f1))"
  rm -rf "$ROOT.new"; mkdir -p "$ROOT.new"
  local deb; for deb in "$DEBS"/*.deb; do dpkg-deb -x "$deb" "$ROOT.new" || die "could not unpack $deb"; done
  (cd "$DEBS" && ls *.deb) >"$ROOT.new/.packages"
  rm -rf "$ROOT"; mv "$ROOT.new" "$ROOT"
  [ -d "$ROOT/lib/$TRIPLET" ] && LIBPATH=$LIBPATH:$ROOT/lib/$TRIPLET
  local v; v=$(run_bin "$SERVER_BIN" --no-defaults --version 2>&1) || die "the unpacked ${SERVER_BIN##*/} does not run: $v"
  v=$(sed -n "s/.* Ver \([0-9][0-9.]*\).*/$PRODUCT \1/p" <<<"$v"); echo "${v:-$PRODUCT}" >"$ROOT/.complete"
  say "fetched: $v"
}

# pid of the server this script started, if alive (its command line names our datadir).
our_pid() {
  [ -s "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE")
  [[ $pid =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "--datadir=$DATA" || return 1
  echo "$pid"
}

# The server binary and the options both flavours take, then the flavour's own.
server_command() {
  SERVER=("$SERVER_BIN" --no-defaults --basedir="$ROOT/usr" --datadir="$DATA")
  [ "$(id -u)" = 0 ] && SERVER+=(--user=root)
  server_opts
}

do_start() {
  do_fetch
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"; flock 9
  local pid
  if pid=$(our_pid); then
    if ping_server; then say "already running (pid $pid, $(cat "$ROOT/.complete"))"; echo "$DSN"; return 0; fi
    say "pid $pid is alive but not answering yet; waiting"
  else
    rm -f "$PIDFILE"
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
      die "port $PORT on 127.0.0.1 is taken by another process (not this script's server); set ${ENV_PREFIX}_PORT"
    fi
    server_command
    if [ ! -f "$RUN/.initialized" ]; then
      rm -rf "$DATA"
      say "initialising $DATA"
      initialize >"$RUN/init.log" 2>&1 ||
        { tail -n 20 "$RUN/init.log" >&2; die "initialising the data directory failed (see $RUN/init.log)"; }
      touch "$RUN/.initialized"
    fi
    # a tmpdir of its own: at start the server deletes every #sql* file of its tmpdir, and in
    # /tmp those may be the temporary tables another server is using
    mkdir -p "$RUN/tmp"
    # shellcheck disable=SC2046
    setsid "$LOADER" --library-path "$LIBPATH" "$ROOT${SERVER[0]}" "${SERVER[@]:1}" \
      --port="$PORT" --bind-address=127.0.0.1 --socket="$SOCK" --tmpdir="$RUN/tmp" \
      --log-error="$ERRLOG" --pid-file="$PIDFILE" \
      --innodb-buffer-pool-size=256M --max-connections=500 $(env_or OPTS "") \
      </dev/null >>"$RUN/server.out" 2>&1 8>&- 9>&- &
    pid=$!
    say "starting ${SERVER_BIN##*/} (pid $pid) on 127.0.0.1:$PORT, log $ERRLOG"
  fi
  local i
  for ((i = 0; i < 240; i++)); do
    ping_server && break
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$ERRLOG" >&2 2>/dev/null || true; die "${SERVER_BIN##*/} exited during start-up (see $ERRLOG)"; }
    sleep 0.5
  done
  ping_server || die "${SERVER_BIN##*/} did not answer within 120 s (see $ERRLOG)"
  client -e 'CREATE DATABASE IF NOT EXISTS test' || die "could not create database test"
  say "running: $(client -N -e 'SELECT VERSION()') (pid $pid)"
  echo "$DSN"
}

do_stop() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"; flock 9
  local pid i
  if ! pid=$(our_pid); then say "not running"; rm -f "$PIDFILE"; return 0; fi
  say "stopping ${SERVER_BIN##*/} (pid $pid)"
  kill -TERM "$pid"
  for ((i = 0; i < 240; i++)); do
    kill -0 "$pid" 2>/dev/null || { say "stopped"; return 0; }
    sleep 0.5
  done
  die "${SERVER_BIN##*/} (pid $pid) did not exit within 120 s"
}

do_status() {
  local pid
  if pid=$(our_pid) && ping_server; then
    say "running: pid $pid, $(client -N -e 'SELECT VERSION()' 2>/dev/null), data $DATA"
    echo "$DSN"; return 0
  elif [ -n "${pid:-}" ]; then
    say "${SERVER_BIN##*/} pid $pid is alive but not answering"; return 3
  fi
  say "not running$([ -f "$ROOT/.complete" ] && echo " (fetched: $(cat "$ROOT/.complete"))" || echo "; not fetched")"
  return 3
}

# `command DIR`: the server's command for a data directory of the caller's (the loader, the
# binary and its options that name the root's paths), one word a line: for a server run under
# valgrind by bench/callgrind_servers.py. `init DIR`: make a new data directory there.
do_command() { DATA=$1; server_command; printf '%s\n' "$LOADER" --library-path "$LIBPATH" "$ROOT${SERVER[0]}" "${SERVER[@]:1}"; }
do_init() {
  DATA=$1
  [ -e "$DATA" ] && die "$DATA exists: init makes a new data directory"
  server_command
  initialize >&2 || die "initialising $DATA failed"
}

main() {
  local cmd=${1:-start}; shift || true
  case "$cmd" in
    start)  do_start ;;
    stop)   do_stop ;;
    status) do_status ;;
    fetch)  if [ "${1:-}" = --force ]; then do_fetch force; else do_fetch; fi; say "$(cat "$ROOT/.complete") in $ROOT" ;;
    dsn)    echo "$DSN" ;;
    root)   do_fetch; echo "$ROOT" ;;
    runner) do_fetch; printf '%s\n' "$LOADER" --library-path "$LIBPATH" ;;
    command|init)
      [ $# -eq 1 ] && [[ $1 == /* ]] || die "$cmd needs the data directory's absolute path"
      do_fetch; "do_$cmd" "$1" ;;
    -h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' ;;
    *) die "unknown command '$cmd' (start, stop, status, fetch, dsn, root, runner, command, init)" ;;
  esac
}
