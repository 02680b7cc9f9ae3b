#!/usr/bin/env bash
# End-to-end `capstan observability up`: start `capstan serve`, a SageMaker
# endpoint (aws CLI) and an InferenceEndpointConfig deployment (capstan
# apply), run `capstan observability up` (a real Prometheus, scraping every
# second) in the background, send requests through each door — aws
# sagemaker-runtime invoke-endpoint, boto3 invoke_endpoint_with_response_stream
# and curl to the OpenAI /v1/chat/completions — and check against Prometheus'
# HTTP API that the request counts per endpoint are what was sent, that the
# replicas' own metrics arrive labelled by discovery (endpoint and variant;
# namespace, deployment and kind), and that capstan's alert rules are loaded.
# Then every panel of the Grafana dashboards (`capstan observability
# dashboards`) is queried and must return data: for the Cluster and
# Reservations dashboards the script also runs a cluster with a MIG group
# and a Karpenter-grown group, a JumpStartModel there that scales from zero,
# and an endpoint on a training plan, which it finally lets expire.
# The same panels are then read from capstan's own metric store, with no
# Prometheus: its Prometheus API (/prometheus, promtool as a client) answers
# every panel's query, and the console's dashboards page in headless
# Chromium (test/e2e/dashcheck) shows every panel with data, and filters by
# the Endpoint variable. Then SIGINT stops Prometheus cleanly.
# Needs CAPSTAN_BIN, the aws CLI, python3 with boto3, jq, curl, prometheus
# (with promtool), Chromium and Go (test/run.sh installs them). About two
# minutes. With CAPSTAN_DOCS_SCREENSHOTS=DIR, the dashboards' screenshots
# are written there (docs/images/console).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
# Nodes launch in 2 s (the default is minutes); capstan's own metric store
# scrapes every second, as the Prometheus below does.
printf 'cluster: {launchTime: 2s}\nmetricsStore: {scrapeInterval: 1s}\n' >"$work/capstan.yaml"
serve_args=(--config "$work/capstan.yaml")

# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
for c in jq curl prometheus promtool go; do command -v "$c" >/dev/null || fail "$c is required (test/run.sh installs it)"; done
python3 -c 'import boto3' 2>/dev/null || fail "python3 with boto3 is required"
export CAPSTAN_SERVER=$url
cap() { "$CAPSTAN_BIN" "$@"; }
advance() { cap clock advance "$1" --server "$url" >/dev/null || fail "clock advance $1"; }
server_now() { date -u -d "$(cap clock now --server "$url" | cut -d' ' -f1)" +%s; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
acct=000000000000

up_pid=""
stop_up() {
  if [ -n "$up_pid" ]; then
    kill -INT "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
    up_pid=""
  fi
}
trap 'stop_up; cleanup' EXIT
serve_fail=$(declare -f fail | sed '1s/^fail/serve_fail/')
eval "$serve_fail"
fail() {
  echo "--- capstan observability up (output)" >&2
  cat "$work/up.out" >&2 2>/dev/null || true
  echo "--- prometheus log (tail)" >&2
  tail -n 20 "$work/prom/prometheus.log" >&2 2>/dev/null || true
  serve_fail "$@"
}

# 1. A SageMaker endpoint and a manifest deployment.
sm create-model --model-name obs-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' \
  --execution-role-arn arn:aws:iam::000000000000:role/capstan >/dev/null
sm create-endpoint-config --endpoint-config-name obs-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"obs-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]' >/dev/null
sm create-endpoint --endpoint-name obs-ep --endpoint-config-name obs-cfg >/dev/null

# The model folder lives under the server's default fsxRoot (<dataDir>/fsx).
model_dir="$work/data/fsx/fs-0123456789abcdef0/capstan/tinyllama"
mkdir -p "$model_dir"
cp "$here/testdata/models/tinyllama/"* "$model_dir/"
cat >"$work/iec.yaml" <<'YAML'
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata:
  name: obs-chat
  namespace: default
spec:
  modelName: obs-chat
  endpointName: obs-chat
  instanceType: ml.g5.24xlarge
  replicas: 1
  invocationEndpoint: v1/chat/completions
  modelSourceConfig:
    modelSourceType: fsx
    fsxStorage: {fileSystemId: fs-0123456789abcdef0, mountName: capstan}
    modelLocation: tinyllama
  worker:
    image: capstan/sim
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
YAML
cap apply -f "$work/iec.yaml" >"$work/apply.out" 2>&1 || fail "apply: $(cat "$work/apply.out")"
name=obs-chat
# shellcheck source=lib/deployment.sh
source "$here/lib/deployment.sh"
wait_status obs-ep InService
wait_state DeploymentComplete
echo "obs-ep InService, obs-chat DeploymentComplete"

# 1b. For the Cluster and Reservations dashboards: obs-cluster with a MIG
# group (one p4d node, every GPU split 7 × 1g.5gb) and a group Karpenter
# grows from 0 nodes, a JumpStartModel there at 0 replicas, and obs-plan, an
# endpoint on a training plan.
role="arn:aws:iam::$acct:role/hyperpod-exec"
lc='"LifeCycleConfig":{"SourceS3Uri":"s3://bucket/lc/","OnCreate":"on_create.sh"}'
sm create-cluster --cluster-name obs-cluster \
  --orchestrator "{\"Eks\":{\"ClusterArn\":\"arn:aws:eks:us-east-1:$acct:cluster/obs\"}}" \
  --instance-groups "[{\"InstanceGroupName\":\"mig\",\"InstanceType\":\"ml.p4d.24xlarge\",\"InstanceCount\":1,\"ExecutionRole\":\"$role\",$lc,
    \"KubernetesConfig\":{\"Labels\":{\"nvidia.com/mig.config\":\"all-1g.5gb\"}}},
    {\"InstanceGroupName\":\"auto\",\"InstanceType\":\"ml.g5.xlarge\",\"InstanceCount\":0,\"ExecutionRole\":\"$role\",$lc}]" \
  >/dev/null || fail "create-cluster"
cs=""
for _ in $(seq 1 120); do
  cs=$(sm describe-cluster --cluster-name obs-cluster --query ClusterStatus --output text)
  [ "$cs" = InService ] && break
  sleep 0.25
done
[ "$cs" = InService ] || fail "obs-cluster not InService (last $cs)"
# The node pool first, then Karpenter on: with Karpenter on and no pool, the
# default pool would govern every group and consolidate the empty MIG node.
cap apply -f "$here/testdata/observability-cluster.yaml" >"$work/apply2.out" 2>&1 || fail "apply: $(cat "$work/apply2.out")"
sm update-cluster --cluster-name obs-cluster --auto-scaling '{"Mode":"Enable","AutoScalerType":"Karpenter"}' \
  --cluster-role "$role" >/dev/null || fail "update-cluster --auto-scaling"

now=$(server_now)
offer=$(sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$(iso "$now")" --end-time-before "$(iso $((now + 30 * 86400)))" \
  --query 'TrainingPlanOfferings[0].TrainingPlanOfferingId' --output text)
plan=$(sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name obs-plan --query TrainingPlanArn --output text)
advance 2m
sm create-endpoint-config --endpoint-config-name obs-plan-cfg --production-variants \
  "[{\"VariantName\":\"AllTraffic\",\"ModelName\":\"obs-model\",\"InitialInstanceCount\":1,\"InstanceType\":\"ml.p5.48xlarge\",
    \"CapacityReservationConfig\":{\"CapacityReservationPreference\":\"capacity-reservations-only\",\"MlReservationArn\":\"$plan\"}}]" >/dev/null
sm create-endpoint --endpoint-name obs-plan --endpoint-config-name obs-plan-cfg >/dev/null
wait_status obs-plan InService
echo "obs-cluster InService (MIG group, Karpenter group at 0), obs-plan InService on its training plan"

# 2. capstan observability up, scraping every second.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The binary itself in the background (not through a function, whose
# subshell would take the SIGINT below instead).
"$CAPSTAN_BIN" observability up --listen "127.0.0.1:$port" --data-dir "$work/prom" --scrape-interval 1s >"$work/up.out" 2>&1 &
up_pid=$!
for _ in $(seq 1 300); do
  grep -q "press Ctrl-C to stop" "$work/up.out" && break
  kill -0 "$up_pid" 2>/dev/null || fail "capstan observability up exited"
  sleep 0.1
done
grep -q "press Ctrl-C to stop" "$work/up.out" || fail "capstan observability up not ready"
prom=$(sed -n 's/^prometheus serving on \(http:.*\)$/\1/p' "$work/up.out")
[ "$prom" = "http://127.0.0.1:$port" ] || fail "prometheus URL '$prom'"
grep -q "(3 ready replicas now)" "$work/up.out" || fail "up did not list the 2 replicas: $(cat "$work/up.out")"
echo "prometheus at $prom"

# 3. Requests through each door: 3 InvokeEndpoint (aws CLI) and 2 response
# streams (boto3) to obs-ep, 4 OpenAI chat completions to obs-chat.
echo '{"messages":[{"role":"user","content":"What is a GPU?"}],"max_tokens":4}' >"$work/in.json"
for i in 1 2 3; do
  smr invoke-endpoint --endpoint-name obs-ep --body "fileb://$work/in.json" \
    --content-type application/json "$work/out$i.json" >/dev/null 2>"$work/invoke.err" || fail "invoke-endpoint: $(cat "$work/invoke.err")"
done
CAPSTAN_URL=$url python3 - <<'PY' || fail "boto3 response stream"
import json, os, time
import boto3
smr = boto3.client("sagemaker-runtime", endpoint_url=os.environ["CAPSTAN_URL"], region_name="us-east-1",
                   aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
body = json.dumps({"messages": [{"role": "user", "content": "Stream, please."}], "max_tokens": 4})
for i in range(2):
    if i:
        time.sleep(1.5)  # a scrape apart, so rate() sees the second stream
    out = smr.invoke_endpoint_with_response_stream(EndpointName="obs-ep", Body=body, ContentType="application/json")
    got = b"".join(ev["PayloadPart"]["Bytes"] for ev in out["Body"] if "PayloadPart" in ev)
    assert got, "empty stream"
PY
for i in 1 2 3 4; do
  code=$(curl -sS -o "$work/openai$i.json" -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model":"obs-chat","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}')
  [ "$code" = 200 ] || fail "OpenAI API: HTTP $code $(head -c 300 "$work/openai$i.json")"
done
# One chat completion wakes obs-jsm: a node launches, then a replica.
code=$(curl -sS --max-time 120 -o "$work/jsm.json" -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"obs-jsm","messages":[{"role":"user","content":"Wake up"}],"max_tokens":4}')
[ "$code" = 200 ] || fail "obs-jsm from zero: HTTP $code $(head -c 300 "$work/jsm.json")"
echo "sent 3 InvokeEndpoint + 2 streams to obs-ep, 4 chat completions to obs-chat, 1 to obs-jsm (from zero)"

# 4. What Prometheus has, once a scrape has seen it.
promq() {
  curl -fsS "$prom/api/v1/query" --data-urlencode "query=$1" |
    jq -r 'if .status != "success" then error(.error) else (.data.result[0].value[1] // "") end'
}
wait_value() { # QUERY WANT
  local v=""
  for _ in $(seq 1 80); do
    v=$(promq "$1") || true
    [ "$v" = "$2" ] && return 0
    sleep 0.25
  done
  fail "$1 = '$v', want $2"
}
wait_value 'sum(capstan_gateway_requests_total{job="capstan",endpoint="obs-ep",status="200"})' 5
wait_value 'sum(capstan_gateway_requests_total{job="capstan",endpoint="obs-chat",status="200"})' 4
wait_value 'sum(capstan_gateway_requests_total{job="capstan",endpoint="obs-jsm",status="200"})' 1
wait_value 'sum(capstan_gateway_requests_total{job="capstan",status!="200"}) or vector(0)' 0
wait_value 'count(capstan_gateway_time_to_first_token_seconds_count{endpoint="obs-ep"} > 0)' 1
# CloudWatch's Invocations (the same requests, counted by the same
# gateway code) agrees with Prometheus.
now=$(server_now)
cw=$(aws cloudwatch --endpoint-url "$url" get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations \
  --dimensions Name=EndpointName,Value=obs-ep Name=VariantName,Value=AllTraffic \
  --start-time "$(iso $((now - 3600)))" --end-time "$(iso $((now + 60)))" --period 60 --statistics Sum \
  --query 'sum(Datapoints[].Sum)' --output text) || fail "get-metric-statistics"
[ "${cw%.0}" = 5 ] || fail "CloudWatch Invocations for obs-ep: $cw, want 5"
echo "request counts per endpoint match (Prometheus and CloudWatch)"

wait_value 'count(vllm:num_requests_running{job="capstan-replicas",endpoint="obs-ep",variant="AllTraffic",instance_type="ml.g5.xlarge"})' 1
wait_value 'count(vllm:num_requests_running{job="capstan-replicas",namespace="default",deployment="obs-chat",kind="InferenceEndpointConfig",endpoint="obs-chat"})' 1
# The replicas' own counters agree with the gateway's.
wait_value 'sum(vllm:request_success_total{job="capstan-replicas",endpoint="obs-chat"})' 4
wait_value 'sum(vllm:request_success_total{job="capstan-replicas",endpoint="obs-ep"})' 5
echo "replica metrics arrive with discovery's labels"

rules=$(curl -fsS "$prom/api/v1/rules?type=alert" | jq -r '[.data.groups[].rules[].name] | join(",")')
for a in CapstanTTFTBudgetBurnPage CapstanErrorBudgetBurnPage CapstanEndpointReplicasNotReady CapstanTrainingPlanExpiring CapstanNodeLaunchFailures; do
  grep -q "$a" <<<"$rules" || fail "alert $a not loaded: $rules"
done
health=$(curl -fsS "$prom/api/v1/rules?type=alert" | jq -r '[.data.groups[].rules[] | select(.health == "err")] | length')
[ "$health" = 0 ] || fail "alert rules failing to evaluate: $(curl -fsS "$prom/api/v1/rules" | jq -c '[.data.groups[].rules[] | select(.health == "err")]')"
echo "alert rules loaded ($(tr ',' '\n' <<<"$rules" | wc -l) alerts)"

# 5. Every panel of the dashboards has data: one query per panel, retried
# until rate() windows hold two scrapes. "Endpoints on an expired plan"
# stays empty until obs-plan's plan ends.
cap observability dashboards --out "$work/grafana" >/dev/null || fail "observability dashboards"
expired="Endpoints on an expired plan"
ok=""
for _ in $(seq 1 60); do
  python3 "$here/lib/dashboard_panels.py" "$work/grafana" "$prom" --expect-empty "$expired" >"$work/panels.txt" 2>&1 && ok=1 && break
  sleep 0.5
done
[ -n "$ok" ] || fail "dashboard panels: $(cat "$work/panels.txt")"
echo "every dashboard panel has data ($(grep -c '^ok' "$work/panels.txt") panels)"

# 5b. The same from capstan's own metric store, with no Prometheus: its
# Prometheus API answers promtool and every panel's query, and the console
# draws every panel in headless Chromium.
store="$url/prometheus"
got=$(promtool query instant --time "$(server_now)" "$store" 'sum(capstan_gateway_requests_total{endpoint="obs-ep",status="200"})') ||
  fail "promtool against capstan's store: $got"
grep -q '=> 5 @' <<<"$got" || fail "promtool: $got, want 5 requests to obs-ep"
ok=""
for _ in $(seq 1 60); do
  python3 "$here/lib/dashboard_panels.py" "$work/grafana" "$store" --expect-empty "$expired" >"$work/store-panels.txt" 2>&1 && ok=1 && break
  sleep 0.5
done
[ -n "$ok" ] || fail "dashboard panels from capstan's store: $(cat "$work/store-panels.txt")"
echo "every dashboard panel has data in capstan's own store ($(grep -c '^ok' "$work/store-panels.txt") panels)"
(cd "$here/../.." && go build -o "$work/dashcheck" ./test/e2e/dashcheck) || fail "build test/e2e/dashcheck"
shots=()
[ -z "${CAPSTAN_DOCS_SCREENSHOTS:-}" ] || shots=(-screenshots "$CAPSTAN_DOCS_SCREENSHOTS")
"$work/dashcheck" -url "$url" -expect-empty "$expired" -endpoint obs-ep "${shots[@]}" >"$work/console.txt" 2>&1 ||
  fail "console dashboards: $(cat "$work/console.txt")"
echo "the console's dashboards page shows every panel with data ($(grep -c '^ok capstan' "$work/console.txt") panels)"

advance 170h
for _ in $(seq 1 60); do
  python3 "$here/lib/dashboard_panels.py" "$work/grafana" "$prom" --only "$expired" >"$work/panels.txt" 2>&1 &&
    python3 "$here/lib/dashboard_panels.py" "$work/grafana" "$store" --only "$expired" >"$work/store-panels.txt" 2>&1 && ok=2 && break
  sleep 0.5
done
[ "$ok" = 2 ] || fail "after the plan ended: $(cat "$work/panels.txt" "$work/store-panels.txt")"
grep "$expired" "$work/panels.txt"
"$work/dashcheck" -url "$url" -only "$expired" >"$work/console.txt" 2>&1 || fail "console after the plan ended: $(cat "$work/console.txt")"
grep "$expired" "$work/console.txt"

# 6. SIGINT stops Prometheus cleanly.
kill -INT "$up_pid"
wait "$up_pid" || fail "capstan observability up exited non-zero after SIGINT"
up_pid=""
grep -q "prometheus stopped" "$work/up.out" || fail "no clean stop"
grep -q "See you next time" "$work/prom/prometheus.log" || fail "prometheus did not shut down cleanly"
if curl -fsS -o /dev/null "$prom/-/ready" 2>/dev/null; then fail "prometheus still answers"; fi
echo "observability flow passed"
