# Helpers the benchmark scripts share (sourced, not run).

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
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
