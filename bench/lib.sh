# Sourced by the bench scripts: process bookkeeping and address discovery.
#   PIDS             background processes to kill on exit (append with PIDS+=($!))
#   cleanup          kill and reap them (also run on EXIT)
#   free_port        a TCP port on 127.0.0.1 that was free a moment ago
#   wait_addr FILE   the host:port a process printed as "listening on http://…"

PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	PIDS=()
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_addr() {
	for _ in $(seq 300); do
		if grep -q 'listening on http://' "$1" 2>/dev/null; then
			grep -o 'listening on http://[^ ]*' "$1" | head -1 | sed 's|listening on http://||'
			return
		fi
		sleep 0.1
	done
	echo "no listening line in $1:" >&2
	cat "$1" >&2
	exit 1
}
