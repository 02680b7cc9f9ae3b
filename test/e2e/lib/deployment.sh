# Sourced by the test/e2e scripts that drive one InferenceEndpointConfig named
# $name through `capstan get` (after lib/serve.sh, which defines fail):
#   obj                          the object as JSON
#   replicas                     its status.replicas (0 when unset)
#   wait_state STATE             poll until status.state is STATE
#   wait_replicas OP N SECONDS   poll until replicas OP N (-eq, -gt, …)
# Needs CAPSTAN_BIN, CAPSTAN_SERVER, jq and name.

obj() { "$CAPSTAN_BIN" get iec "$name" -o json 2>/dev/null; }
replicas() { obj | jq -r '.status.replicas // 0'; }

wait_state() {
  local want=$1 s=""
  for _ in $(seq 1 240); do
    s=$(obj | jq -r '.status.state // ""') || true
    [ "$s" = "$want" ] && return 0
    [ "$s" = DeploymentFailed ] && fail "$name DeploymentFailed: $(obj | jq -c .status)"
    sleep 0.25
  done
  fail "$name not $want (last: $s; status $(obj | jq -c .status))"
}

wait_replicas() {
  local op=$1 n=$2 secs=$3 r=""
  for _ in $(seq 1 $((secs * 4))); do
    r=$(replicas) || true
    [ -n "$r" ] && [ "$r" "$op" "$n" ] && return 0
    sleep 0.25
  done
  fail "replicas not $op $n within ${secs}s (last: $r; status $(obj | jq -c .status))"
}
