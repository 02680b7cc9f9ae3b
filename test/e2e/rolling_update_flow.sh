#!/usr/bin/env bash
# End-to-end rolling update with the real aws CLI against `capstan serve
# --dev-clock` (docs/deployments.md): an endpoint fills a 1-instance training
# plan; updating it to a new model blue/green (the default) is refused with
# what the plan has free and the --deployment-config to use instead; a
# rolling update with batch 1 replaces the instance in place while a loop of
# invoke-endpoint calls runs, and none of them fails. DeploymentConfig
# validation names the member at fault. Needs CAPSTAN_BIN.
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

advance() { "$CAPSTAN_BIN" clock advance "$1" --server "$url" >/dev/null || fail "clock advance $1"; }
server_now() { date -u -d "$("$CAPSTAN_BIN" clock now --server "$url" | cut -d' ' -f1)" +%s; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

echo '{"messages":[{"role":"user","content":"Which model are you?"}],"max_tokens":4}' >"$work/chat.json"
# served_model NAME: the "model" of an OpenAI chat answer through InvokeEndpoint.
served_model() {
  smr invoke-endpoint --endpoint-name "$1" --body "fileb://$work/chat.json" --content-type application/json "$work/model.json" >/dev/null \
    || fail "invoke $1"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$work/model.json"
}

acct=000000000000
arn="arn:aws:sagemaker:us-east-1:$acct:endpoint/ep"
sm create-model --model-name llama --execution-role-arn "arn:aws:iam::$acct:role/capstan" \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null
sm create-model --model-name qwen --execution-role-arn "arn:aws:iam::$acct:role/capstan" \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"Qwen/Qwen2.5-7B-Instruct"}}' >/dev/null

# --- a 1-instance plan, starting now
now=$(server_now)
offer=$(sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$(iso "$now")" --end-time-before "$(iso $((now + 30 * 86400)))" \
  --query 'TrainingPlanOfferings[0].TrainingPlanOfferingId' --output text)
plan=$(sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name p --query TrainingPlanArn --output text)
for m in llama qwen; do
  sm create-endpoint-config --endpoint-config-name "cfg-$m" --production-variants '[{"VariantName":"AllTraffic","ModelName":"'"$m"'",
    "InitialInstanceCount":1,"InstanceType":"ml.p5.48xlarge","InitialVariantWeight":1.0,
    "CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"'"$plan"'"}}]' >/dev/null
done
sm create-endpoint --endpoint-name ep --endpoint-config-name cfg-llama >/dev/null
advance 2m
wait_status ep InService
[ "$(served_model ep)" = llama-3.1-8b ] || fail "ep serves $(cat "$work/model.json")"
echo "InService on plan p with llama"

# --- blue/green (no --deployment-config) needs a second instance: refused
expect_error ValidationException "Cannot update endpoint $arn with a blue/green deployment: the new configuration needs 1 instance(s) of training plan p beside the 1 serving, and the plan has 0 free (1 in total). Update with --deployment-config '{\"RollingUpdatePolicy\":{\"MaximumBatchSize\":{\"Type\":\"INSTANCE_COUNT\",\"Value\":1},\"WaitIntervalInSeconds\":0}}' to replace instances in place, or use a configuration that fits." \
  sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen
[ "$(status ep)" = InService ] || fail "a refused update changed the endpoint"
echo "blue/green refused with the rolling hint"

# --- DeploymentConfig validation names the member
expect_error ValidationException "Value 'BATCH' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.type' failed to satisfy constraint: Member must satisfy enum value set: [INSTANCE_COUNT, CAPACITY_PERCENT]" \
  sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen \
  --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"BATCH","Value":1},"WaitIntervalInSeconds":0}}'
expect_error ValidationException "Value 'null' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.canarySize' failed to satisfy constraint: Member must be set when Type is CANARY" \
  sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen \
  --deployment-config '{"BlueGreenUpdatePolicy":{"TrafficRoutingConfiguration":{"Type":"CANARY","WaitIntervalInSeconds":60}}}'
expect_error ValidationException "at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: Member must name alarms defined in the server's configuration" \
  sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen \
  --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0},"AutoRollbackConfiguration":{"Alarms":[{"AlarmName":"nope"}]}}'
# The CLI itself refuses a member DeploymentConfig does not have, by path...
if out=$(sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen \
  --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"Foo":1}}' 2>&1); then
  fail "the CLI sent an unknown member"
fi
grep -qF 'Unknown parameter in DeploymentConfig.RollingUpdatePolicy: "Foo"' <<<"$out" || fail "CLI: $out"
# ...and so does the server, for clients that send it anyway.
curl -sS "$url/" -H 'X-Amz-Target: SageMaker.UpdateEndpoint' -H 'Content-Type: application/x-amz-json-1.1' \
  -d '{"EndpointName":"ep","EndpointConfigName":"cfg-qwen","DeploymentConfig":{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0,"Foo":1}}}' \
  >"$work/unknown.json"
python3 - "$work/unknown.json" <<'PY' || fail "unknown member: $(cat "$work/unknown.json")"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["__type"] == "ValidationException", e
assert "at 'deploymentConfig.rollingUpdatePolicy.Foo' failed to satisfy constraint: Member is not recognized" in e["message"], e
PY
[ "$(status ep)" = InService ] || fail "a refused update changed the endpoint"
echo "validation ok"

# --- rolling update under load: every invocation succeeds
: >"$work/ok"
: >"$work/failed"
# invoke_loop N: invoke until $work/stop exists, one line per call in ok or failed.
invoke_loop() {
  export AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS=1 # a failure must count, not be retried away
  while [ ! -e "$work/stop" ]; do
    if smr invoke-endpoint --endpoint-name ep --body "fileb://$work/chat.json" --content-type application/json \
      "$work/loop$1.json" >/dev/null 2>>"$work/loop.err"; then
      echo >>"$work/ok"
    else
      echo >>"$work/failed"
    fi
  done
}
loop_pids=()
for i in 1 2; do
  invoke_loop "$i" &
  loop_pids+=($!)
done
bg_pids+=("${loop_pids[@]}")
for _ in $(seq 1 80); do [ -s "$work/ok" ] && break; sleep 0.25; done
[ -s "$work/ok" ] || fail "the invocation loop got no answer: $(cat "$work/loop.err")"

sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-qwen \
  --deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}' >/dev/null
read -r st pcfg pstatus pdesired <<<"$(sm describe-endpoint --endpoint-name ep --query \
  '[EndpointStatus,PendingDeploymentSummary.EndpointConfigName,PendingDeploymentSummary.ProductionVariants[0].VariantStatus[0].Status,PendingDeploymentSummary.ProductionVariants[0].DesiredInstanceCount]' \
  --output text)"
if [ "$st" = Updating ]; then
  [ "$pcfg $pstatus $pdesired" = "cfg-qwen Updating 1" ] || fail "PendingDeploymentSummary during the update: $pcfg $pstatus $pdesired"
  echo "updating: PendingDeploymentSummary $pcfg $pstatus"
fi
wait_status ep InService
sm wait endpoint-in-service --endpoint-name ep
sleep 1
touch "$work/stop"
wait "${loop_pids[@]}" || true
ok=$(wc -l <"$work/ok")
failed=$(wc -l <"$work/failed")
[ "$failed" = 0 ] || fail "$failed of $((ok + failed)) invocations failed during the rolling update: $(head -5 "$work/loop.err")"
echo "rolling update: $ok invocations, 0 failed"

[ "$(served_model ep)" = qwen2.5-7b ] || fail "after the update ep serves $(cat "$work/model.json")"
ldc=$(sm describe-endpoint --endpoint-name ep --query LastDeploymentConfig --output json | tr -d ' \n')
[ "$ldc" = '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}' ] \
  || fail "LastDeploymentConfig: $ldc"
sm describe-endpoint --endpoint-name ep >"$work/describe.json"
python3 - "$work/describe.json" <<'PY' || fail "describe after the update: $(cat "$work/describe.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["EndpointConfigName"] == "cfg-qwen" and "PendingDeploymentSummary" not in d, d
assert d["ProductionVariants"][0]["CurrentInstanceCount"] == 1, d["ProductionVariants"]
assert d["LastDeploymentConfig"] == {"RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                                                             "WaitIntervalInSeconds": 0}}, d["LastDeploymentConfig"]
PY
[ "$(sm describe-training-plan --training-plan-name p --query '[InUseInstanceCount,AvailableInstanceCount]' --output text)" = "1	0" ] \
  || fail "plan p after the update"
echo "qwen serves; LastDeploymentConfig shown"

# --- RetainDeploymentConfig: back to llama with the last policy
sm update-endpoint --endpoint-name ep --endpoint-config-name cfg-llama --retain-deployment-config >/dev/null
wait_status ep InService
[ "$(served_model ep)" = llama-3.1-8b ] || fail "after the retained update ep serves $(cat "$work/model.json")"
echo "retained rolling policy: llama serves again"

sm delete-endpoint --endpoint-name ep
sm wait endpoint-deleted --endpoint-name ep
echo "rolling_update_flow: PASS"
