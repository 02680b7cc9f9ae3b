# Sourced by the test/e2e scripts: checks the prerequisites, starts `capstan
# serve --dev-clock` on a free port with a temporary data dir and fast engines,
# stops it on exit, and defines the helpers the scripts share:
#   sm / smr            aws sagemaker / sagemaker-runtime against the server
#   status NAME         the endpoint's EndpointStatus
#   wait_status NAME S  poll until the endpoint is S (the CLI waiter polls every
#                       30 s; scripts confirm with it once the status is reached)
#   expect_error CODE MSG cmd...  cmd must fail with that code and message
#   fail MSG            print MSG and the server log's tail, exit 1
# Needs CAPSTAN_BIN (path to the capstan binary). Sets work and url.
# A script that starts other processes first (e.g. an S3 server) may set
# before sourcing: work (its temp dir), bg_pids (processes cleanup stops) and
# serve_args (extra `capstan serve` flags).

: "${CAPSTAN_BIN:?set CAPSTAN_BIN to the capstan binary}"
command -v aws >/dev/null || { echo "the aws CLI is required" >&2; exit 1; }

work=${work:-$(mktemp -d)}
server_pid=""
[ -n "${bg_pids+x}" ] || bg_pids=()
[ -n "${serve_args+x}" ] || serve_args=()
cleanup() {
  local p
  for p in "$server_pid" "${bg_pids[@]}"; do
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- server log (tail)" >&2
  tail -n 80 "$work/server.log" >&2 || true
  exit 1
}

# The file exists before the first read: the background job opens it only once
# it is scheduled, and a read of a missing file would end the script under
# pipefail.
: >"$work/server.out"
"$CAPSTAN_BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" --engine-time-scale 0.01 --dev-clock \
  "${serve_args[@]}" >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
url=""
for _ in $(seq 1 300); do
  url=$(sed -n 's/^capstan serving on \(http:\/\/.*\)$/\1/p' "$work/server.out" | head -1)
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "capstan serve exited"
  sleep 0.1
done
[ -n "$url" ] || fail "capstan serve did not print its address"
echo "server at $url"

export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
sm() { aws sagemaker --endpoint-url "$url" "$@"; }
smr() { aws sagemaker-runtime --endpoint-url "$url" "$@"; }
status() { sm describe-endpoint --endpoint-name "$1" --query EndpointStatus --output text; }

wait_status() {
  local s=""
  for _ in $(seq 1 160); do
    s=$(status "$1") || true
    [ "$s" = "$2" ] && return 0
    if [ "$s" = "Failed" ] && [ "$2" != "Failed" ]; then
      fail "endpoint $1 Failed: $(sm describe-endpoint --endpoint-name "$1" --query FailureReason --output text)"
    fi
    sleep 0.25
  done
  fail "endpoint $1 not $2 (last: $s)"
}

expect_error() {
  local code=$1 msg=$2; shift 2
  if out=$("$@" 2>&1); then fail "expected $code from: $*"; fi
  grep -q "($code)" <<<"$out" || fail "expected $code from: $*; got: $out"
  grep -qF "$msg" <<<"$out" || fail "expected message containing '$msg' from: $*; got: $out"
}
