# Helpers the benchmark scripts share (sourced, not run). A script cds to the repository root, sets
# `set -euo pipefail`, and sources this file; then it keeps only its own scenario and output.

bench_root=$PWD
bench_pids=()
work=""

# The absolute path of the first executable among the candidates (relative ones from the repository root);
# stops the run with a hint to build when there is none. Usage: stepd=$(bench_binary "${STEPD:-.build/release/stepd}")
bench_binary() {
    local candidate
    for candidate in "$@"; do
        [[ $candidate = /* ]] || candidate=$bench_root/$candidate
        if [ -x "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    candidate=$1
    [[ $candidate = /* ]] || candidate=$bench_root/$candidate
    echo "no $candidate; build first: swift build -c release" >&2
    exit 1
}

# Runs the calling script again under scripts/with-postgres (a throwaway PostgreSQL) unless
# STEPLEDGER_TEST_POSTGRES_URL already names a server. Usage: bench_with_postgres "$0" "$@"
bench_with_postgres() {
    if [ -z "${STEPLEDGER_TEST_POSTGRES_URL:-}" ]; then
        exec "$bench_root/scripts/with-postgres" "$@"
    fi
    # A server named from outside is migrated and filled with rows: only one on this machine.
    case "$STEPLEDGER_TEST_POSTGRES_URL" in
    postgres://*@127.0.0.1[:/]* | postgres://*@localhost[:/]* | postgres://*@\[::1\][:/]* | *\?host=/* | *\&host=/*) ;;
    *)
        echo "STEPLEDGER_TEST_POSTGRES_URL must name a server on 127.0.0.1, localhost or [::1] (or a socket folder)" >&2
        exit 1
        ;;
    esac
}

# A temporary folder in $work, removed at exit after every process started by bench_start is stopped.
bench_workdir() {
    work=$(mktemp -d "/tmp/$1.XXXXXX")
    trap bench_cleanup EXIT
}

bench_cleanup() {
    local pid
    # SIGCONT first: a server stopped for a copy (bench-sqlite-writes) would never act on the SIGTERM.
    for pid in ${bench_pids[@]+"${bench_pids[@]}"}; do kill -CONT "$pid" 2>/dev/null || true; done
    for pid in ${bench_pids[@]+"${bench_pids[@]}"}; do kill "$pid" 2>/dev/null || true; done
    for pid in ${bench_pids[@]+"${bench_pids[@]}"}; do wait "$pid" 2>/dev/null || true; done
    [ -z "$work" ] || rm -rf "$work"
}

# A random development secret (what STEPLEDGER_JWT_DEV_SECRET and stepbench's tokens share).
bench_dev_secret() {
    head -c 32 /dev/urandom | base64
}

# Request logs at warning and the anti-cheat sink off, for every server the script starts.
bench_quiet_env() {
    export STEPLEDGER_LOG_LEVEL=warning
    export STEPLEDGER_LOG_ANTI_CHEAT_SINK=off
}

# A test-phase server with a random development secret (exported, stepbench reads it too), quiet logs and
# the given rate limit lifted: ingest (STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE) or walker.
bench_test_phase_env() {
    STEPLEDGER_JWT_DEV_SECRET=$(bench_dev_secret)
    export STEPLEDGER_JWT_DEV_SECRET
    export STEPLEDGER_MODE=test-phase
    case "$1" in
        ingest) export STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000 ;;
        walker) export STEPLEDGER_RATE_LIMIT_WALKER_PER_MINUTE=100000 ;;
    esac
    bench_quiet_env
}

# A TCP port on 127.0.0.1 that nothing listens on now; with arguments, one that is none of them.
free_port() {
    local port
    while :; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
        case " $* " in
            *" $port "*) ;;
            *) echo "$port"; return 0 ;;
        esac
    done
}

# Waits until GET <url>/livez answers 200; stops the run if the server exits or stays silent for 60 s.
wait_live() {
    local url=$1 pid=$2 log=$3
    for _ in $(seq 1 600); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "the server behind $url exited; its log:" >&2
            tail -n 40 "$log" >&2
            exit 1
        fi
        if python3 -c 'import sys, urllib.request as u; u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=1)' \
            "$url/livez" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    echo "no answer from $url/livez after 60 s; the server's log:" >&2
    tail -n 40 "$log" >&2
    exit 1
}

# Starts COMMAND… in the background with its output in LOG, remembers it for bench_cleanup, and waits until
# it answers /livez on PORT; its pid is left in $bench_pid. Usage: bench_start PORT LOG COMMAND…
bench_start() {
    local port=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 &
    bench_pid=$!
    bench_pids+=("$bench_pid")
    wait_live "http://127.0.0.1:$port" "$bench_pid" "$log"
}

# Sets `database` for a `sqlite|postgres` run: a fresh file in $work, or the throwaway PostgreSQL, migrated.
# Needs $stepd and bench_workdir. Usage: bench_store_database STORE
bench_store_database() {
    if [ "$1" = postgres ]; then
        database=$STEPLEDGER_TEST_POSTGRES_URL
        "$stepd" migrate --database "$database" >/dev/null
    else
        database=$work/bench.sqlite
    fi
}

# Starts `stepd serve` on DATABASE and `stepbench echo` beside it, their logs (stepd.log, echo.log) in the current
# folder; sets ingest_port, ingest_pid, echo_port and echo_pid. Needs $stepd and $stepbench.
# Usage: bench_serve_ingest_and_echo DATABASE
bench_serve_ingest_and_echo() {
    ingest_port=$(free_port)
    echo_port=$(free_port "$ingest_port")
    bench_start "$ingest_port" stepd.log "$stepd" serve --database "$1" --port "$ingest_port"
    ingest_pid=$bench_pid
    bench_start "$echo_port" echo.log "$stepbench" echo --port "$echo_port"
    echo_pid=$bench_pid
}

# Stops a process started by bench_start and forgets it.
bench_stop() {
    local pid=$1 kept=() other
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for other in ${bench_pids[@]+"${bench_pids[@]}"}; do
        [ "$other" = "$pid" ] || kept+=("$other")
    done
    bench_pids=(${kept[@]+"${kept[@]}"})
}

# The psql of the PostgreSQL that scripts/with-postgres started (or the one on PATH).
bench_psql() {
    echo "${STEPLEDGER_TEST_POSTGRES_BINDIR:+$STEPLEDGER_TEST_POSTGRES_BINDIR/}psql"
}

# Creates database NAME on the server STEPLEDGER_TEST_POSTGRES_URL names and prints its URL.
bench_postgres_database() {
    "$(bench_psql)" "$STEPLEDGER_TEST_POSTGRES_URL" -q -c "CREATE DATABASE $1"
    echo "${STEPLEDGER_TEST_POSTGRES_URL/\/postgres\?//$1?}"
}

# The URL of database NAME (postgres by default) on the server scripts/with-postgres started, over its Unix-domain
# socket instead of TCP: with-postgres puts the socket in the folder that holds the data directory (-k).
bench_postgres_socket_url() {
    local port folder
    port=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or 5432)' \
        "$STEPLEDGER_TEST_POSTGRES_URL")
    folder=$(dirname "${STEPLEDGER_TEST_POSTGRES_DATA:?run under scripts/with-postgres}")
    [ -S "$folder/.s.PGSQL.$port" ] || { echo "no PostgreSQL socket in $folder" >&2; exit 1; }
    echo "postgres://postgres@/${1:-postgres}?host=$folder&port=$port&sslmode=disable"
}

# CPU seconds (user + system) the thread named NAME of process PID has used; 0 when there is none.
# Usage: thread_cpu PID NAME
thread_cpu() {
    local task ticks
    ticks=$(getconf CLK_TCK)
    for task in /proc/"$1"/task/*; do
        if [ "$(cat "$task/comm")" = "$2" ]; then
            awk -v hz="$ticks" '{ print ($14 + $15) / hz }' "$task/stat"
            return
        fi
    done
    echo 0
}
