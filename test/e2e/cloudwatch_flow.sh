#!/usr/bin/env bash
# The CloudWatch metrics API with the real aws CLI and boto3 against
# `capstan serve`: after N invocations of an endpoint, get-metric-statistics
# reads Invocations Sum = N and a plausible ModelLatency (Microseconds),
# get-metric-data and list-metrics agree, boto3 reads the same in each of
# CloudWatch's three protocols (JSON 1.0, smithy-rpc-v2-cbor, query), an
# unknown metric or namespace is empty, and a bad period, time range or
# statistic is CloudWatch's error. Needs CAPSTAN_BIN (path to the capstan
# binary) and python3 with boto3.
set -euo pipefail

# shellcheck source=lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

cw() { aws cloudwatch --endpoint-url "$url" "$@"; }
# Times around the server's clock (the dev clock starts at the wall clock).
start=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
dims=(Name=EndpointName,Value=cw-endpoint Name=VariantName,Value=AllTraffic)

# Errors first: they need no data.
expect_error InvalidParameterValue "The parameter Period must be a multiple of 60." \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 90 --statistics Sum
expect_error InvalidParameterValue "The parameter Period must be 1, 5, 10, 30, or a multiple of 60." \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 7 --statistics Sum
expect_error InvalidParameterValue "The parameter StartTime must be less than the parameter EndTime." \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$end" --end-time "$start" --period 60 --statistics Sum
expect_error InvalidParameterValue "failed to satisfy constraint: Member must satisfy enum value set" \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 60 --statistics Median
expect_error InvalidParameterCombination "which exceeds the limit of 1,440" \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 1 --statistics Sum
expect_error InvalidParameterCombination "At least one of the parameters Statistics and ExtendedStatistics must be specified." \
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 60
expect_error InvalidParameterValue "metric math expressions are not supported" \
  cw get-metric-data --start-time "$start" --end-time "$end" \
  --metric-data-queries '[{"Id":"e1","Expression":"SUM(METRICS())"}]'
# An unknown namespace or metric is empty, not an error.
for q in "AWS/Nope Invocations" "AWS/SageMaker NoSuchMetric"; do
  set -- $q
  n=$(cw get-metric-statistics --namespace "$1" --metric-name "$2" --dimensions "${dims[@]}" \
    --start-time "$start" --end-time "$end" --period 60 --statistics Sum --query 'length(Datapoints)' --output text)
  [ "$n" = 0 ] || fail "$q: $n datapoints"
done
[ "$(cw list-metrics --namespace AWS/Nope --query 'length(Metrics)' --output text)" = 0 ] || fail "list-metrics AWS/Nope"
echo "errors and empty answers ok"

# N real invocations of an endpoint.
N=5
sm create-model --model-name cw-model \
  --primary-container '{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}' >/dev/null
sm create-endpoint-config --endpoint-config-name cw-cfg --production-variants \
  '[{"VariantName":"AllTraffic","ModelName":"cw-model","InitialInstanceCount":1,"InstanceType":"ml.g5.xlarge"}]' >/dev/null
sm create-endpoint --endpoint-name cw-endpoint --endpoint-config-name cw-cfg >/dev/null
wait_status cw-endpoint InService
echo '{"inputs":"What is a GPU?","parameters":{"max_new_tokens":8}}' >"$work/in.json"
for _ in $(seq 1 "$N"); do
  smr invoke-endpoint --endpoint-name cw-endpoint --body "fileb://$work/in.json" --content-type application/json "$work/out.json" >/dev/null
done
echo "invoked $N times"

# Invocations: Sum over the hour periods is N (a request is recorded as it
# finishes, so allow the last one a moment).
invocations() {
  cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
    --start-time "$start" --end-time "$end" --period 3600 --statistics Sum --query 'sum(Datapoints[].Sum)' --output text
}
got=""
for _ in $(seq 1 40); do
  got=$(invocations)
  [ "$got" = "$N.0" ] && break
  sleep 0.25
done
[ "$got" = "$N.0" ] || fail "Invocations Sum $got, want $N"
unit=$(cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 3600 --statistics Sum --query 'Datapoints[0].Unit' --output text)
[ "$unit" = None ] || fail "Invocations unit $unit"
# A unit the metric is not recorded in matches nothing, as in CloudWatch.
n=$(cw get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 3600 --statistics Sum --unit Seconds --query 'length(Datapoints)' --output text)
[ "$n" = 0 ] || fail "Invocations in Seconds: $n datapoints"
echo "Invocations Sum = $got"

# ModelLatency: microseconds, a plausible average (above 0, under a minute),
# one sample per invocation.
read -r avg count unit < <(cw get-metric-statistics --namespace AWS/SageMaker --metric-name ModelLatency --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 86400 --statistics Average SampleCount \
  --query 'Datapoints[0].[Average,SampleCount,Unit]' --output text)
[ "$unit" = Microseconds ] || fail "ModelLatency unit $unit"
[ "$count" = "$N.0" ] || fail "ModelLatency SampleCount $count, want $N"
python3 -c "import sys; a=float(sys.argv[1]); sys.exit(0 if 0 < a < 60e6 else 1)" "$avg" || fail "ModelLatency Average $avg µs"
p99=$(cw get-metric-statistics --namespace AWS/SageMaker --metric-name ModelLatency --dimensions "${dims[@]}" \
  --start-time "$start" --end-time "$end" --period 86400 --extended-statistics p99 --query 'Datapoints[0].ExtendedStatistics.p99' --output text)
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) * 0.98 else 1)" "$p99" "$avg" || fail "p99 $p99 below average $avg"
echo "ModelLatency Average = $avg µs, p99 = $p99 µs"

# get-metric-data agrees.
cat >"$work/queries.json" <<JSON
[{"Id":"inv","MetricStat":{"Metric":{"Namespace":"AWS/SageMaker","MetricName":"Invocations",
  "Dimensions":[{"Name":"EndpointName","Value":"cw-endpoint"},{"Name":"VariantName","Value":"AllTraffic"}]},"Period":60,"Stat":"Sum"}},
 {"Id":"lat","MetricStat":{"Metric":{"Namespace":"AWS/SageMaker","MetricName":"ModelLatency",
  "Dimensions":[{"Name":"EndpointName","Value":"cw-endpoint"},{"Name":"VariantName","Value":"AllTraffic"}]},"Period":86400,"Stat":"SampleCount"}}]
JSON
got=$(cw get-metric-data --start-time "$start" --end-time "$end" --metric-data-queries "file://$work/queries.json" \
  --query 'MetricDataResults[?Id==`inv`] | [0].sum(Values)' --output text)
[ "$got" = "$N.0" ] || fail "get-metric-data Invocations $got, want $N"
got=$(cw get-metric-data --start-time "$start" --end-time "$end" --metric-data-queries "file://$work/queries.json" \
  --query 'MetricDataResults[?Id==`lat`] | [0].Values[0]' --output text)
[ "$got" = "$N.0" ] || fail "get-metric-data ModelLatency SampleCount $got, want $N"
echo "get-metric-data ok"

# list-metrics names the endpoint's series.
got=$(cw list-metrics --namespace AWS/SageMaker --dimensions Name=EndpointName,Value=cw-endpoint \
  --query 'Metrics[].MetricName' --output text | tr '\t' '\n' | sort | tr '\n' ' ')
for m in Invocations ModelLatency; do
  grep -qw "$m" <<<"$got" || fail "list-metrics: $got lacks $m"
done
echo "list-metrics: $got"

# boto3, in each protocol botocore knows for CloudWatch.
python3 - "$url" "$N" "$start" "$end" <<'PY' || fail "boto3"
import sys, datetime
import boto3, botocore.model
url, n = sys.argv[1], float(sys.argv[2])
start, end = (datetime.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in sys.argv[3:5])
dims = [{"Name": "EndpointName", "Value": "cw-endpoint"}, {"Name": "VariantName", "Value": "AllTraffic"}]
for proto in ("json", "smithy-rpc-v2-cbor", "query"):
    botocore.model.PRIORITY_ORDERED_SUPPORTED_PROTOCOLS = (proto,)
    c = boto3.client("cloudwatch", endpoint_url=url, region_name="us-east-1")
    assert c.meta.service_model.resolved_protocol == proto
    out = c.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocations", Dimensions=dims,
                                  StartTime=start, EndTime=end, Period=3600, Statistics=["Sum"])
    got = sum(d["Sum"] for d in out["Datapoints"])
    assert got == n, (proto, out)
    lat = c.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="ModelLatency", Dimensions=dims,
                                  StartTime=start, EndTime=end, Period=86400, Statistics=["Average"])
    assert lat["Datapoints"][0]["Unit"] == "Microseconds" and lat["Datapoints"][0]["Average"] > 0, (proto, lat)
    pages = c.get_paginator("get_metric_data").paginate(StartTime=start, EndTime=end, MetricDataQueries=[
        {"Id": "inv", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": dims},
                                     "Period": 60, "Stat": "SampleCount"}}])
    assert sum(v for p in pages for r in p["MetricDataResults"] for v in r["Values"]) == n, proto
    names = {m["MetricName"] for m in c.list_metrics(Namespace="AWS/SageMaker")["Metrics"]}
    assert {"Invocations", "ModelLatency"} <= names, (proto, names)
    try:
        c.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocations", StartTime=start, EndTime=end,
                                Period=61, Statistics=["Sum"])
        raise AssertionError(proto + ": period 61 accepted")
    except c.exceptions.InvalidParameterValueException as e:
        assert e.response["Error"]["Code"] == "InvalidParameterValue", (proto, e.response)
        assert "multiple of 60" in e.response["Error"]["Message"], (proto, e.response)
    print(f"boto3 {proto}: Invocations Sum {got:g}")
PY

sm delete-endpoint --endpoint-name cw-endpoint >/dev/null
echo "cloudwatch flow ok"
