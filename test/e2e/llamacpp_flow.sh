#!/usr/bin/env bash
# End-to-end with a real engine: llama.cpp's llama-server as the replicas of
# a SageMaker endpoint, driven by the real aws CLI and boto3. Uploads the
# tiny GGUF model (test/engines/llamacpp.sh) to moto's S3 as a model.tar.gz,
# starts `capstan serve` with engines.llamacpp pointing at llama-server,
# creates the model with the llama.cpp server image, an endpoint config and
# an endpoint on a CPU instance type, and checks: invoke-endpoint (a TGI-style
# body, translated by the gateway for llama-server) answers generated text;
# boto3's response stream gets the tokens; the OpenAI API on the same
# endpoint answers completions and chat; CloudWatch Invocations and the
# gateway's Prometheus counter count every request; bad input (an image with
# no engine, an archive without a .gguf, a file that is no GGUF) is refused
# at create-model with nothing stored; a GGUF llama.cpp cannot load fails the
# endpoint with llama.cpp's own error as FailureReason.
# Needs CAPSTAN_BIN, the aws CLI, python3 with boto3, moto_server, and
# llama-server: CAPSTAN_LLAMACPP_DIR (test/engines/llamacpp.sh prints it; the
# script runs it when unset).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${CAPSTAN_BIN:?set CAPSTAN_BIN to the capstan binary}"
for c in aws python3 curl tar; do command -v "$c" >/dev/null || { echo "$c is required" >&2; exit 1; }; done
llama=${CAPSTAN_LLAMACPP_DIR:-$("$here/../engines/llamacpp.sh" | tail -1)}
[ -x "$llama/llama-server" ] && [ -s "$llama/tiny.gguf" ] || { echo "no llama-server and tiny.gguf in $llama" >&2; exit 1; }

work=$(mktemp -d)
bg_pids=()
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_PAGER="" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

# 1. moto and the model archives.
# shellcheck source=lib/moto.sh
source "$here/lib/moto.sh"
mkdir -p "$work/tiny" "$work/nogguf" "$work/notgguf" "$work/broken"
cp "$llama/tiny.gguf" "$work/tiny/"
echo 'not a model' >"$work/nogguf/README.md"
echo 'plain text, not GGUF' >"$work/notgguf/model.gguf"
# The GGUF magic and a header cut short: it passes the fetch's check and
# llama.cpp refuses it when it loads.
head -c 4096 "$llama/tiny.gguf" >"$work/broken/model.gguf"
for m in tiny nogguf notgguf broken; do tar -C "$work/$m" -czf "$work/$m.tar.gz" .; done
s3cli mb s3://models >/dev/null
for m in tiny nogguf notgguf broken; do s3cli cp --only-show-errors "$work/$m.tar.gz" "s3://models/$m/model.tar.gz"; done

# 2. capstan serve with llama-server as the llama.cpp engine (one thread per
# replica: two cores run two replicas without stalling).
cat >"$work/capstan.yaml" <<YAML
engines:
  llamacpp:
    binary: $llama/llama-server
    args: ["--threads", "1"]
YAML
serve_args=(--config "$work/capstan.yaml" --s3-endpoint "$s3")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
image=ghcr.io/ggml-org/llama.cpp:server

# 3. Bad input: refused at create-model, naming the field; nothing stored.
expect_error ValidationException 'PrimaryContainer.Image: image "acme/server:1" selects no engine' \
  sm create-model --model-name bad-image --primary-container "Image=acme/server:1,ModelDataUrl=s3://models/tiny/model.tar.gz"
expect_error ValidationException "no .gguf file" \
  sm create-model --model-name no-gguf --primary-container "Image=$image,ModelDataUrl=s3://models/nogguf/model.tar.gz"
expect_error ValidationException "is not a GGUF file" \
  sm create-model --model-name not-gguf --primary-container "Image=$image,ModelDataUrl=s3://models/notgguf/model.tar.gz"
expect_error ValidationException "loads a .gguf file: give ModelDataUrl" \
  sm create-model --model-name no-data --primary-container "Image=$image"
[ "$(sm list-models --query 'length(Models)' --output text)" = 0 ] || fail "a refused model was stored"
echo "bad input refused"

# 4. The tiny model on llama-server.
sm create-model --model-name tiny --primary-container "Image=$image,ModelDataUrl=s3://models/tiny/model.tar.gz" >/dev/null
sm create-endpoint-config --endpoint-config-name tiny \
  --production-variants VariantName=AllTraffic,ModelName=tiny,InstanceType=ml.c5.xlarge,InitialInstanceCount=1 >/dev/null
sm create-endpoint --endpoint-name tiny --endpoint-config-name tiny >/dev/null
wait_status tiny InService
log=$(ls "$work"/data/replicas/tiny.AllTraffic.*.log | head -1)
grep -q "llama-server --model .*/model.gguf\|llama-server --model .*/tiny.gguf" "$log" || fail "the replica is not llama-server: $(head -3 "$log")"
echo "endpoint tiny InService on llama-server"

echo '{"inputs":"What is a capstan?","parameters":{"max_new_tokens":8}}' >"$work/req.json"
smr invoke-endpoint --endpoint-name tiny --content-type application/json --body "fileb://$work/req.json" "$work/out.json" >/dev/null
python3 - "$work/out.json" <<'PY' || fail "invoke-endpoint answered: $(cat "$work/out.json")"
import json, sys
out = json.load(open(sys.argv[1]))
assert isinstance(out, list) and isinstance(out[0]["generated_text"], str) and out[0]["generated_text"], out
PY
echo "invoke-endpoint: $(cat "$work/out.json")"

python3 - "$url" "$work/req.json" <<'PY' || fail "the response stream failed"
import boto3, json, sys
rt = boto3.client("sagemaker-runtime", endpoint_url=sys.argv[1])
r = rt.invoke_endpoint_with_response_stream(EndpointName="tiny", ContentType="application/json",
    Body=open(sys.argv[2], "rb").read())
events = [e["PayloadPart"]["Bytes"].decode() for e in r["Body"] if "PayloadPart" in e]
text = "".join(events)
tokens = [json.loads(l[5:]) for l in text.split("\n") if l.startswith("data:")]
assert len(tokens) >= 2, text
assert tokens[-1]["generated_text"] == "".join(t["token"]["text"] for t in tokens), tokens[-1]
assert tokens[-1]["details"]["generated_tokens"] == 8, tokens[-1]
print("response stream:", len(tokens), "token events, text", repr(tokens[-1]["generated_text"]))
PY

# A stop string ends the text: llama.cpp says which one matched (asked with
# "verbose"), so TGI's finish_reason is stop_sequence, not eos_token, unary
# and streamed. (Greedy decoding of the fixed tiny model: one of these
# letters comes within 32 tokens.)
echo '{"inputs":"What is a capstan?","parameters":{"max_new_tokens":32,"stop":["e","a","o","i"," "],"details":true}}' >"$work/stop.json"
python3 - "$url" "$work/stop.json" <<'PY' || fail "a stop string did not end the text as stop_sequence"
import boto3, json, sys
rt = boto3.client("sagemaker-runtime", endpoint_url=sys.argv[1])
body = open(sys.argv[2], "rb").read()
out = json.loads(rt.invoke_endpoint(EndpointName="tiny", ContentType="application/json", Body=body)["Body"].read())
d = out[0]["details"]
assert d["finish_reason"] == "stop_sequence" and d["generated_tokens"] < 32, out
r = rt.invoke_endpoint_with_response_stream(EndpointName="tiny", ContentType="application/json",
    Body=json.dumps(dict(json.loads(body), stream=True)))
text = "".join(e["PayloadPart"]["Bytes"].decode() for e in r["Body"] if "PayloadPart" in e)
last = [json.loads(l[5:]) for l in text.split("\n") if l.startswith("data:")][-1]
assert last["details"]["finish_reason"] == "stop_sequence", last
print("stop strings: finish_reason stop_sequence after", d["generated_tokens"], "tokens, unary and streamed")
PY

curl -fsS "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","prompt":"Hello","max_tokens":4}' >"$work/oai.json" || fail "OpenAI completions failed"
grep -q '"text_completion"' "$work/oai.json" || fail "completions answered: $(cat "$work/oai.json")"
curl -fsS "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}' >"$work/chat.json" || fail "OpenAI chat failed"
grep -q '"chat.completion"' "$work/chat.json" || fail "chat answered: $(cat "$work/chat.json")"
echo "OpenAI completions and chat answered"

# 5. Both doors' requests are counted: at least 4 requests on the endpoint.
served=$(curl -fsS "$url/metrics" | awk '/^capstan_gateway_requests_total\{/ && /endpoint="tiny"/ {n += $2} END {print n+0}')
[ "$served" -ge 4 ] || fail "capstan_gateway_requests_total counts $served requests for tiny, want 4"
start=$(date -u -d '-10 min' +%Y-%m-%dT%H:%M:%SZ) end=$(date -u -d '+10 min' +%Y-%m-%dT%H:%M:%SZ)
inv=$(aws cloudwatch --endpoint-url "$url" get-metric-statistics --namespace AWS/SageMaker --metric-name Invocations \
  --dimensions Name=EndpointName,Value=tiny Name=VariantName,Value=AllTraffic \
  --start-time "$start" --end-time "$end" --period 3600 --statistics Sum --query 'sum(Datapoints[].Sum)' --output text)
[ "${inv%.*}" -ge 4 ] || fail "CloudWatch Invocations = $inv, want 4"
echo "counted: prometheus $served, CloudWatch Invocations $inv"

# 6. A GGUF llama.cpp cannot load: the endpoint fails with its own words.
sm create-model --model-name broken --primary-container "Image=$image,ModelDataUrl=s3://models/broken/model.tar.gz" >/dev/null
sm create-endpoint-config --endpoint-config-name broken \
  --production-variants VariantName=AllTraffic,ModelName=broken,InstanceType=ml.c5.xlarge,InitialInstanceCount=1 >/dev/null
sm create-endpoint --endpoint-name broken --endpoint-config-name broken >/dev/null
wait_status broken Failed
reason=$(sm describe-endpoint --endpoint-name broken --query FailureReason --output text)
grep -qi "gguf\|failed to load\|model" <<<"$reason" && grep -q "llama" <<<"$reason" ||
  fail "FailureReason does not carry llama.cpp's error: $reason"
echo "broken model: FailureReason: $reason"

sm delete-endpoint --endpoint-name tiny
sm delete-endpoint --endpoint-name broken
echo "PASS llamacpp_flow"
