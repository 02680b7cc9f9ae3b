# Sourced by the test/e2e scripts that need S3, before lib/serve.sh: starts
# moto's standalone S3 server on a free port and defines
#   s3        its URL
#   s3cli     aws s3 against it
# Needs work (a temp dir) and bg_pids (lib/serve.sh's cleanup stops them).
if command -v moto_server >/dev/null; then moto=(moto_server); else moto=(python3 -m moto.server); fi
s3port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${moto[@]}" -H 127.0.0.1 -p "$s3port" >"$work/moto.log" 2>&1 &
bg_pids+=($!)
s3="http://127.0.0.1:$s3port"
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "$s3/" 2>/dev/null && break
  sleep 0.1
done
curl -fsS -o /dev/null "$s3/" || { cat "$work/moto.log" >&2; echo "FAIL: moto_server did not start" >&2; exit 1; }
s3cli() { aws s3 --endpoint-url "$s3" "$@"; }
