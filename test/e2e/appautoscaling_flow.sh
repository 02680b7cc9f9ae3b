#!/usr/bin/env bash
# End-to-end Application Auto Scaling with the real aws CLI against `capstan
# serve`: create a SageMaker model → endpoint config → endpoint (1 instance),
# register the variant as a scalable target, put a target-tracking policy on
# SageMakerVariantInvocationsPerInstance, describe both, drive traffic with
# `capstan bench --api sagemaker` and check that describe-endpoint's
# CurrentInstanceCount grows (and never beyond MaxCapacity), that the scaling
# activity is listed, then delete the policy and deregister the target, plus
# the error cases the CLI relies on. Last, a variant on a 2-instance training
# plan: MaxCapacity 3 is refused naming the reservation, and under load the
# variant scales to 2 and no further.
#
# Time: the server runs on the dev clock (--dev-clock, see lib/serve.sh). The
# controller takes one CloudWatch-style datapoint per evaluation interval
# (default 60 s) and scales out after 3 consecutive datapoints above the
# target; each `minute` below is one such datapoint: the dev clock advances
# 60 s in 6 s steps while bench keeps requests flowing, so the requests land
# throughout the simulated minute the datapoint reads (one 60 s jump would
# leave that minute empty). Needs CAPSTAN_BIN. About 30–60 s.
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"
aas() { aws application-autoscaling --endpoint-url "$url" "$@"; }
minute() {
  for _ in $(seq 1 10); do
    sleep 0.1
    cap clock advance 6s --server "$url" >/dev/null || fail "clock advance"
  done
}
cap() { "$CAPSTAN_BIN" "$@"; }

acct=000000000000
ep=scale-ep
res="endpoint/$ep/variant/AllTraffic"
dim=sagemaker:variant:DesiredInstanceCount
max=3

sm create-model --model-name scale-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' \
  --execution-role-arn "arn:aws:iam::$acct:role/capstan" >/dev/null
sm create-endpoint-config --endpoint-config-name scale-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"scale-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]' >/dev/null
sm create-endpoint --endpoint-name "$ep" --endpoint-config-name scale-cfg >/dev/null
wait_status "$ep" InService
echo "endpoint InService with 1 instance"

current() { sm describe-endpoint --endpoint-name "$ep" --query 'ProductionVariants[0].CurrentInstanceCount' --output text; }
desired() { sm describe-endpoint --endpoint-name "$ep" --query 'ProductionVariants[0].DesiredInstanceCount' --output text; }
tt_config='{"TargetValue":2.0,"PredefinedMetricSpecification":{"PredefinedMetricType":"SageMakerVariantInvocationsPerInstance"},"ScaleOutCooldown":60,"ScaleInCooldown":600}'

# Errors before registration.
expect_error ValidationException "endpoint/nope/variant/AllTraffic" \
  aas register-scalable-target --service-namespace sagemaker --resource-id endpoint/nope/variant/AllTraffic \
  --scalable-dimension "$dim" --min-capacity 1 --max-capacity 2
expect_error ObjectNotFoundException "No scalable target registered for service namespace: sagemaker, resource ID: $res" \
  aas put-scaling-policy --policy-name ipi --service-namespace sagemaker --resource-id "$res" \
  --scalable-dimension "$dim" --policy-type TargetTrackingScaling --target-tracking-scaling-policy-configuration "$tt_config"
expect_error ValidationException "Minimum capacity cannot be greater than maximum capacity" \
  aas register-scalable-target --service-namespace sagemaker --resource-id "$res" \
  --scalable-dimension "$dim" --min-capacity 3 --max-capacity 2

arn=$(aas register-scalable-target --service-namespace sagemaker --resource-id "$res" --scalable-dimension "$dim" \
  --min-capacity 1 --max-capacity "$max" --query ScalableTargetARN --output text)
[[ "$arn" =~ ^arn:aws:application-autoscaling:[a-z0-9-]+:$acct:scalable-target/[0-9a-f]{36}$ ]] || fail "target arn $arn"
[ "$(aas describe-scalable-targets --service-namespace sagemaker --resource-ids "$res" \
  --query 'ScalableTargets[0].MaxCapacity' --output text)" = "$max" ] || fail "describe-scalable-targets"
echo "registered $res (1..$max)"

expect_error ValidationException "StepScaling policies are not supported" \
  aas put-scaling-policy --policy-name step --service-namespace sagemaker --resource-id "$res" \
  --scalable-dimension "$dim" --policy-type StepScaling
policy_arn=$(aas put-scaling-policy --policy-name ipi --service-namespace sagemaker --resource-id "$res" \
  --scalable-dimension "$dim" --policy-type TargetTrackingScaling \
  --target-tracking-scaling-policy-configuration "$tt_config" --query PolicyARN --output text)
[[ "$policy_arn" =~ ^arn:aws:autoscaling:[a-z0-9-]+:$acct:scalingPolicy:[0-9a-f-]{36}:resource/sagemaker/$res:policyName/ipi$ ]] ||
  fail "policy arn $policy_arn"
pt=$(aas describe-scaling-policies --service-namespace sagemaker --resource-id "$res" \
  --query 'ScalingPolicies[0].[PolicyType,TargetTrackingScalingPolicyConfiguration.PredefinedMetricSpecification.PredefinedMetricType]' --output text)
[ "$pt" = "$(printf 'TargetTrackingScaling\tSageMakerVariantInvocationsPerInstance')" ] || fail "describe-scaling-policies: $pt"
echo "policy ipi: target 2 invocations per instance per minute"

# Traffic: 4 requests always outstanding, far above 2 per instance per minute.
cap bench --target "$url" --api sagemaker --endpoint "$ep" --workload random:input=16,output=8 \
  --concurrency 4 --duration 300s --no-metrics --progress 0 >"$work/bench.txt" 2>&1 &
bench_pid=$!
stop_bench() { kill "$bench_pid" 2>/dev/null || true; wait "$bench_pid" 2>/dev/null || true; }
trap 'stop_bench; cleanup' EXIT

scaled=""
for i in $(seq 1 60); do
  minute
  kill -0 "$bench_pid" 2>/dev/null || fail "bench exited early: $(tail -20 "$work/bench.txt")"
  d=$(desired) c=$(current)
  [ "$d" -le "$max" ] && [ "$c" -le "$max" ] || fail "beyond MaxCapacity $max: desired $d, current $c"
  if [ "$c" -gt 1 ]; then
    scaled=$c
    break
  fi
done
[ -n "$scaled" ] || fail "CurrentInstanceCount did not grow (desired $(desired), current $(current)); activities: $(aas describe-scaling-activities --service-namespace sagemaker --include-not-scaled-activities --output json)"
echo "scaled out: CurrentInstanceCount $scaled after $i datapoints"
stop_bench

act=$(aas describe-scaling-activities --service-namespace sagemaker --resource-id "$res" \
  --query 'ScalingActivities[?StatusCode==`Successful`] | [-1].[Description,Cause]' --output text)
grep -q "Setting desired instance count to" <<<"$act" || fail "no successful scaling activity: $act"
grep -q "AlarmHigh" <<<"$act" || fail "activity cause: $act"
echo "activity: $act"

aas delete-scaling-policy --policy-name ipi --service-namespace sagemaker --resource-id "$res" --scalable-dimension "$dim"
[ "$(aas describe-scaling-policies --service-namespace sagemaker --query 'length(ScalingPolicies)' --output text)" = 0 ] ||
  fail "policy still listed"
expect_error ObjectNotFoundException "No scaling policy found for service namespace: sagemaker, resource ID: $res, scalable dimension: $dim, policy name: ipi" \
  aas delete-scaling-policy --policy-name ipi --service-namespace sagemaker --resource-id "$res" --scalable-dimension "$dim"
aas deregister-scalable-target --service-namespace sagemaker --resource-id "$res" --scalable-dimension "$dim"
[ "$(aas describe-scalable-targets --service-namespace sagemaker --query 'length(ScalableTargets)' --output text)" = 0 ] ||
  fail "target still listed"
expect_error ObjectNotFoundException "No scalable target registered" \
  aas deregister-scalable-target --service-namespace sagemaker --resource-id "$res" --scalable-dimension "$dim"
echo "policy deleted, target deregistered"

# --- A variant on a reservation: never beyond the training plan.
server_now() { date -u -d "$(cap clock now --server "$url" | cut -d' ' -f1)" +%s; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
now=$(server_now)
offer=$(sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 2 \
  --duration-hours 336 --start-time-after "$(iso $((now + 3600)))" --end-time-before "$(iso $((now + 30 * 86400)))" \
  --query 'TrainingPlanOfferings[0].TrainingPlanOfferingId' --output text)
plan=$(sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name aas-plan --query TrainingPlanArn --output text)
sm create-endpoint-config --endpoint-config-name reserved-cfg --production-variants '[{"VariantName":"AllTraffic",
  "ModelName":"scale-model","InitialInstanceCount":1,"InstanceType":"ml.p5.48xlarge","CapacityReservationConfig":
  {"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"'"$plan"'"}}]' >/dev/null
sm create-endpoint --endpoint-name reserved-ep --endpoint-config-name reserved-cfg >/dev/null
cap clock advance 2h --server "$url" >/dev/null || fail "clock advance"
wait_status reserved-ep InService
rres=endpoint/reserved-ep/variant/AllTraffic
expect_error ValidationException "MaxCapacity 3 exceeds the reservation of variant AllTraffic of endpoint reserved-ep" \
  aas register-scalable-target --service-namespace sagemaker --resource-id "$rres" --scalable-dimension "$dim" \
  --min-capacity 1 --max-capacity 3
aas register-scalable-target --service-namespace sagemaker --resource-id "$rres" --scalable-dimension "$dim" \
  --min-capacity 1 --max-capacity 2 >/dev/null
aas put-scaling-policy --policy-name ipi --service-namespace sagemaker --resource-id "$rres" \
  --scalable-dimension "$dim" --policy-type TargetTrackingScaling \
  --target-tracking-scaling-policy-configuration '{"TargetValue":0.5,"PredefinedMetricSpecification":{"PredefinedMetricType":"SageMakerVariantInvocationsPerInstance"},"ScaleOutCooldown":0}' >/dev/null
cap bench --target "$url" --api sagemaker --endpoint reserved-ep --workload random:input=16,output=8 \
  --concurrency 4 --duration 300s --no-metrics --progress 0 >"$work/bench2.txt" 2>&1 &
bench_pid=$!
rcur() { sm describe-endpoint --endpoint-name reserved-ep --query 'ProductionVariants[0].[DesiredInstanceCount,CurrentInstanceCount]' --output text; }
reached=""
for _ in $(seq 1 40); do
  minute
  read -r d c <<<"$(rcur)"
  [ "$d" -le 2 ] && [ "$c" -le 2 ] || fail "beyond the 2-instance reservation: desired $d, current $c"
  [ "$c" = 2 ] && reached=1
  # Keep going a few datapoints past the plan's size: the alarm stays in ALARM.
  [ -n "$reached" ] && n_after=$(( ${n_after:-0} + 1 ))
  [ "${n_after:-0}" -ge 4 ] && break
done
[ -n "$reached" ] || fail "reserved variant did not scale to 2 (desired/current $(rcur))"
stop_bench
reason=$(aas describe-scaling-activities --service-namespace sagemaker --resource-id "$rres" --include-not-scaled-activities \
  --query 'ScalingActivities[0].NotScaledReasons[0].[Code,MaxCapacity]' --output text)
[ "$reason" = "$(printf 'AlreadyAtMaxCapacity\t2')" ] || fail "not-scaled reason: $reason"
echo "reserved variant held at its plan's 2 instances ($reason)"
echo "appautoscaling_flow: PASS"
