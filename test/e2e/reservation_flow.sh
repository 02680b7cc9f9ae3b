#!/usr/bin/env bash
# End-to-end GPU capacity reservation flow (issue 3) with the real aws CLI
# against `capstan serve --dev-clock`: search training plan offerings, buy a
# plan, run a capacity-reservations-only endpoint on it (waiting until the
# plan starts), scale within and beyond a plan, let the plan expire (the
# endpoint then answers ModelError with SageMaker's message), migrate the
# endpoint to a new plan and to on-demand, delete. Needs CAPSTAN_BIN.
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

advance() { "$CAPSTAN_BIN" clock advance "$1" --server "$url" >/dev/null || fail "clock advance $1"; }
# server_now: the dev clock as epoch seconds.
server_now() { date -u -d "$("$CAPSTAN_BIN" clock now --server "$url" | cut -d' ' -f1)" +%s; }
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

invoke() { smr invoke-endpoint --endpoint-name "$1" --body "fileb://$work/in.json" --content-type application/json "$work/out.json"; }

acct=000000000000
echo '{"inputs":"What is a GPU?","parameters":{"max_new_tokens":8}}' >"$work/in.json"
sm create-model --model-name my-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' \
  --execution-role-arn "arn:aws:iam::$acct:role/capstan" >/dev/null

now=$(server_now)
after=$(iso $((now + 3600)))
before=$(iso $((now + 30 * 86400)))

# --- search: validation and edge cases
expect_error ValidationException "Member must satisfy enum value set" \
  sm search-training-plan-offerings --target-resources endpoint --instance-type ml.g5.xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$after" --end-time-before "$before"
expect_error ValidationException "Member must have value less than or equal to 87600" \
  sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 100000 --start-time-after "$after" --end-time-before "$before"
expect_error ValidationException "Member must have value less than or equal to 256" \
  sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 300 \
  --duration-hours 168 --start-time-after "$after" --end-time-before "$before"
expect_error ValidationException "must be before EndTimeBefore" \
  sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$before" --end-time-before "$after"
n=$(sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$after" --end-time-before "$(iso $((now + 4 * 86400)))" \
  --query 'length(TrainingPlanOfferings)' --output text)
[ "$n" = 0 ] || fail "a 4-day window offered $n offerings for 168 hours"
echo "search validation ok"

# --- search and buy plan A: 1 × ml.p5.48xlarge for 168 h
sm search-training-plan-offerings --target-resources "endpoint" --instance-type "ml.p5.48xlarge" --instance-count 1 \
  --duration-hours 168 --start-time-after "$after" --end-time-before "$before" >"$work/search.json"
python3 - "$work/search.json" "$((now + 3600))" <<'PY' || fail "search output: $(cat "$work/search.json")"
import json, sys
offers = json.load(open(sys.argv[1]))["TrainingPlanOfferings"]
assert offers, "no offerings"
o = offers[0]
assert o["TrainingPlanOfferingId"].startswith("tpo-"), o
assert o["DurationHours"] == 168 and o["CurrencyCode"] == "USD", o
assert o["UpfrontFee"] == "%.2f" % (113.068 * 168), o["UpfrontFee"]
r = o["ReservedCapacityOfferings"][0]
assert r["InstanceType"] == "ml.p5.48xlarge" and r["InstanceCount"] == 1, r
assert r["AvailabilityZone"] in ("us-east-1a", "us-east-1b"), r
assert r["StartTime"] >= int(sys.argv[2]) and r["EndTime"] - r["StartTime"] == 168 * 3600, r
starts = [x["ReservedCapacityOfferings"][0]["StartTime"] for x in offers]
assert starts == sorted(starts), starts
PY
offer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["TrainingPlanOfferings"][0]["TrainingPlanOfferingId"])' "$work/search.json")
plan_arn=$(sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name "p4-for-inference-endpoint" \
  --query TrainingPlanArn --output text)
[ "$plan_arn" = "arn:aws:sagemaker:us-east-1:$acct:training-plan/p4-for-inference-endpoint" ] || fail "plan arn $plan_arn"
expect_error ResourceInUse "p4-for-inference-endpoint already exists" \
  sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name "p4-for-inference-endpoint"
expect_error ValidationException "does not exist or is no longer valid" \
  sm create-training-plan --training-plan-offering-id "$offer" --training-plan-name "again"
expect_error ValidationException "does not exist or is no longer valid" \
  sm create-training-plan --training-plan-offering-id "tpo-0000" --training-plan-name "again"
expect_error ResourceNotFound "Training plan nope does not exist" sm describe-training-plan --training-plan-name nope
read -r st total avail inuse <<<"$(sm describe-training-plan --training-plan-name p4-for-inference-endpoint \
  --query '[Status,TotalInstanceCount,AvailableInstanceCount,InUseInstanceCount]' --output text)"
[ "$st $total $avail $inuse" = "Scheduled 1 1 0" ] || fail "plan A described as: $st $total $avail $inuse"
echo "plan A bought: $plan_arn"

# --- plan B: 2 instances, for scaling within a plan
sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 2 \
  --duration-hours 336 --start-time-after "$after" --end-time-before "$before" \
  --query 'TrainingPlanOfferings[0].TrainingPlanOfferingId' --output text >"$work/offer-b"
plan_b=$(sm create-training-plan --training-plan-offering-id "$(cat "$work/offer-b")" --training-plan-name plan-b \
  --query TrainingPlanArn --output text)

# --- reserved-only endpoint config: validation
rcfg() { # name count type arn
  printf '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":%s,"InstanceType":"%s","InitialVariantWeight":1.0,"CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only","MlReservationArn":"%s"}}]' "$2" "$3" "$4"
}
expect_error ValidationException "Training plan p4-for-inference-endpoint has 1 instances (1 available to this endpoint); 2 were requested" \
  sm create-endpoint-config --endpoint-config-name too-big --production-variants "$(rcfg x 2 ml.p5.48xlarge "$plan_arn")"
expect_error ValidationException "does not match training plan p4-for-inference-endpoint" \
  sm create-endpoint-config --endpoint-config-name wrong-type --production-variants "$(rcfg x 1 ml.p4d.24xlarge "$plan_arn")"
expect_error ValidationException "does not exist" \
  sm create-endpoint-config --endpoint-config-name no-plan --production-variants \
  "$(rcfg x 1 ml.p5.48xlarge "arn:aws:sagemaker:us-east-1:$acct:training-plan/missing")"

sm create-endpoint-config --endpoint-config-name "ftp-ep-config" \
  --production-variants '[{"VariantName":"AllTraffic","ModelName":"my-model",
   "InitialInstanceCount":1,"InstanceType":"ml.p5.48xlarge","InitialVariantWeight":1.0,
   "CapacityReservationConfig":{"CapacityReservationPreference":"capacity-reservations-only",
   "MlReservationArn":"'"$plan_arn"'"}}]' >/dev/null
sm create-endpoint --endpoint-name "my-endpoint" --endpoint-config-name "ftp-ep-config" >/dev/null

# Before the plan starts the endpoint waits in Creating and says until when.
msg=""
for _ in $(seq 1 40); do
  msg=$(sm describe-endpoint --endpoint-name my-endpoint --query 'ProductionVariants[0].VariantStatus[0].StatusMessage' --output text)
  grep -q "Waiting for training plan p4-for-inference-endpoint to start at" <<<"$msg" && break
  sleep 0.25
done
grep -q "Waiting for training plan p4-for-inference-endpoint to start at" <<<"$msg" || fail "no waiting message: $msg"
[ "$(status my-endpoint)" = Creating ] || fail "endpoint not Creating before the plan starts"
echo "waiting: $msg"

advance 2h
wait_status my-endpoint InService
invoke my-endpoint >"$work/invoke.json" || fail "invoke on the reservation"
[ -s "$work/out.json" ] || fail "empty invocation output"
read -r pref used tot av <<<"$(sm describe-endpoint --endpoint-name my-endpoint --query \
  'ProductionVariants[0].CapacityReservationConfig.[CapacityReservationPreference,UsedByCurrentEndpoint,TotalInstanceCount,AvailableInstanceCount]' --output text)"
[ "$pref $used $tot $av" = "capacity-reservations-only 1 1 0" ] || fail "variant CapacityReservationConfig: $pref $used $tot $av"
read -r st avail inuse <<<"$(sm describe-training-plan --training-plan-name p4-for-inference-endpoint \
  --query '[Status,AvailableInstanceCount,InUseInstanceCount]' --output text)"
[ "$st $avail $inuse" = "Active 0 1" ] || fail "plan A while in use: $st $avail $inuse"
echo "InService on plan A, invoked"

# --- scaling: beyond plan A fails; within plan B works
expect_error ValidationException "Training plan p4-for-inference-endpoint has 1 instances (1 available to this endpoint); 2 were requested" \
  sm update-endpoint-weights-and-capacities --endpoint-name my-endpoint \
  --desired-weights-and-capacities VariantName=AllTraffic,DesiredInstanceCount=2
sm create-endpoint-config --endpoint-config-name cfg-b1 --production-variants "$(rcfg x 1 ml.p5.48xlarge "$plan_b")" >/dev/null
sm create-endpoint --endpoint-name ep-b --endpoint-config-name cfg-b1 >/dev/null
wait_status ep-b InService
sm update-endpoint-weights-and-capacities --endpoint-name ep-b \
  --desired-weights-and-capacities VariantName=AllTraffic,DesiredInstanceCount=2 >/dev/null
wait_status ep-b InService
[ "$(sm describe-endpoint --endpoint-name ep-b --query 'ProductionVariants[0].CurrentInstanceCount' --output text)" = 2 ] || fail "ep-b not at 2"
[ "$(sm describe-training-plan --training-plan-name plan-b --query InUseInstanceCount --output text)" = 2 ] || fail "plan-b in use"
# The documented way: update-endpoint to a config with the new count on the same plan.
sm update-endpoint --endpoint-name ep-b --endpoint-config-name cfg-b1 >/dev/null
wait_status ep-b InService
[ "$(sm describe-endpoint --endpoint-name ep-b --query 'ProductionVariants[0].CurrentInstanceCount' --output text)" = 1 ] || fail "ep-b not back at 1"
sm create-endpoint-config --endpoint-config-name "ftp-ep-config-scaled" --production-variants "$(rcfg x 2 ml.p5.48xlarge "$plan_b")" >/dev/null
sm update-endpoint --endpoint-name ep-b --endpoint-config-name "ftp-ep-config-scaled" >/dev/null
wait_status ep-b InService
[ "$(sm describe-endpoint --endpoint-name ep-b --query '[EndpointConfigName,ProductionVariants[0].CurrentInstanceCount]' --output text)" = "ftp-ep-config-scaled	2" ] \
  || fail "ep-b not at 2 on ftp-ep-config-scaled"
echo "scaled within plan B to 2; beyond plan A refused"

# --- expiry of plan A
advance 167h
for _ in $(seq 1 80); do [ "$(status my-endpoint)" = Failed ] && break; sleep 0.25; done
[ "$(status my-endpoint)" = Failed ] || fail "endpoint not Failed after the plan ended"
reason=$(sm describe-endpoint --endpoint-name my-endpoint --query FailureReason --output text)
grep -q "Training plan p4-for-inference-endpoint ended" <<<"$reason" || fail "FailureReason: $reason"
[ "$(sm describe-training-plan --training-plan-name p4-for-inference-endpoint --query Status --output text)" = Expired ] || fail "plan A not Expired"
expect_error ModelError "Endpoint capacity reservation has expired. Please update endpoint configuration." invoke my-endpoint
[ "$(sm list-training-plans --filters Name=Status,Value=Expired --query 'TrainingPlanSummaries[].TrainingPlanName' --output text)" = p4-for-inference-endpoint ] \
  || fail "list-training-plans Expired"
[ "$(sm list-training-plans --filters Name=Status,Value=Active --query 'length(TrainingPlanSummaries)' --output text)" = 1 ] \
  || fail "list-training-plans Active"
echo "expired: invocations fail with ModelError"

# --- migrate to a new plan, then to on-demand
now=$(server_now)
sm search-training-plan-offerings --target-resources endpoint --instance-type ml.p5.48xlarge --instance-count 1 \
  --duration-hours 168 --start-time-after "$(iso "$now")" --end-time-before "$(iso $((now + 30 * 86400)))" \
  --query 'TrainingPlanOfferings[0].TrainingPlanOfferingId' --output text >"$work/offer-c"
plan_c=$(sm create-training-plan --training-plan-offering-id "$(cat "$work/offer-c")" --training-plan-name plan-c \
  --query TrainingPlanArn --output text)
sm create-endpoint-config --endpoint-config-name cfg-c --production-variants "$(rcfg x 1 ml.p5.48xlarge "$plan_c")" >/dev/null
sm update-endpoint --endpoint-name my-endpoint --endpoint-config-name cfg-c >/dev/null
advance 2m
wait_status my-endpoint InService
invoke my-endpoint >/dev/null || fail "invoke after migrating to plan C"
echo "migrated to plan C"

sm create-endpoint-config --endpoint-config-name cfg-od --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"my-model","InitialInstanceCount":1,"InstanceType":"ml.p5.48xlarge","InitialVariantWeight":1.0}]' >/dev/null
sm update-endpoint --endpoint-name my-endpoint --endpoint-config-name cfg-od >/dev/null
wait_status my-endpoint InService
invoke my-endpoint >/dev/null || fail "invoke after migrating to on-demand"
[ "$(sm describe-training-plan --training-plan-name plan-c --query InUseInstanceCount --output text)" = 0 ] || fail "plan C still in use"
echo "migrated to on-demand"

curl -fsS "$url/metrics" >"$work/metrics.txt"
grep -q '^capstan_reserved_instances_in_use{plan="plan-b"} 2' "$work/metrics.txt" || fail "metrics: $(grep capstan_reserved "$work/metrics.txt")"
grep -q '^capstan_plan_instance_hours_total{plan="p4-for-inference-endpoint"} 1[0-9][0-9]' "$work/metrics.txt" \
  || fail "plan A instance-hours: $(grep capstan_plan_instance_hours "$work/metrics.txt")"

for ep in my-endpoint ep-b; do sm delete-endpoint --endpoint-name "$ep"; done
for ep in my-endpoint ep-b; do sm wait endpoint-deleted --endpoint-name "$ep"; done
[ "$(sm describe-training-plan --training-plan-name plan-b --query '[InUseInstanceCount,AvailableInstanceCount]' --output text)" = "0	2" ] \
  || fail "plan-b not released"
echo "deleted"
echo "reservation_flow: PASS"
