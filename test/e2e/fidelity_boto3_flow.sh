#!/usr/bin/env bash
# The SageMaker features scripts use, through boto3 (the aws CLI covers the
# same in cpu_endpoint_flow.sh, tags_flow.sh, serverless_flow.sh,
# async_flow.sh and s3_model_flow.sh), against `capstan serve --dev-clock
# --s3-endpoint` with moto's standalone S3 server:
#   - a CPU endpoint (ml.m5.xlarge) that answers;
#   - tags round trip on a model, an endpoint config, an endpoint, a training
#     plan and a cluster, and a 129-character key refused;
#   - a serverless endpoint that scales 0 -> 2 -> 0 and throttles past
#     MaxConcurrency;
#   - an async invocation whose output appears in S3;
#   - a model from an S3 archive whose config.json is in no catalog, and an
#     archive without config.json refused.
# Needs CAPSTAN_BIN, python3 with boto3, moto_server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
bg_pids=()
# shellcheck source=lib/moto.sh
source "$(dirname "$0")/lib/moto.sh"
# The server reads S3 with the default credential chain: give it moto's.
export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1
serve_args=(--s3-endpoint "$s3" --engine-time-scale 0.1)
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
python3 -c 'import boto3' 2>/dev/null || fail "python3 with boto3 is required"

CAPSTAN_URL=$url S3_URL=$s3 CAPSTAN_BIN=$CAPSTAN_BIN WORK=$work python3 - <<'PY' || fail "boto3 flow"
import io, json, os, subprocess, sys, tarfile, threading, time
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

url, s3url = os.environ["CAPSTAN_URL"], os.environ["S3_URL"]
creds = dict(region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
sm = boto3.client("sagemaker", endpoint_url=url, **creds)
smr = boto3.client("sagemaker-runtime", endpoint_url=url, config=Config(retries={"max_attempts": 1, "mode": "standard"}), **creds)
s3 = boto3.client("s3", endpoint_url=s3url, **creds)
role = "arn:aws:iam::000000000000:role/capstan"
sim = {"Image": "capstan/sim", "Environment": {"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

def expect(code, text, fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        err = e.response["Error"]
        check(err["Code"] == code and text in err["Message"], f"{fn.__name__}: got {err}, want {code} with {text!r}")
        return
    check(False, f"{fn.__name__} succeeded, want {code}")

def poll(what, cond, timeout=60):
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        check(time.time() < deadline, what)
        time.sleep(0.2)

def in_service(name):
    def ready():
        d = sm.describe_endpoint(EndpointName=name)
        check(d["EndpointStatus"] != "Failed", f"{name} Failed: {d.get('FailureReason')}")
        return d["EndpointStatus"] == "InService"
    poll(f"{name} InService", ready)

def invoke(name, tokens=4):
    body = json.dumps({"inputs": "What is a capstan?", "parameters": {"max_new_tokens": tokens}})
    r = smr.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=body)
    return r["Body"].read()

def endpoint(name, model, variant):
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[dict(VariantName="AllTraffic", ModelName=model, **variant)])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)

# 1. A CPU endpoint.
sm.create_model(ModelName="small", ExecutionRoleArn=role,
                PrimaryContainer={"Image": "capstan/sim", "Environment": {"SM_MODEL_ID": "qwen2.5-0.5b"}})
endpoint("cpu", "small", {"InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1})
in_service("cpu")
check(len(invoke("cpu")) > 0, "empty answer from the CPU endpoint")
print("CPU endpoint on ml.m5.xlarge answered")

# 2. Tags on every kind of resource.
sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer=sim, Tags=[{"Key": "team", "Value": "search"}])
offer = sm.search_training_plan_offerings(TargetResources=["endpoint"], InstanceType="ml.p5.48xlarge", InstanceCount=1,
                                          DurationHours=24)["TrainingPlanOfferings"][0]["TrainingPlanOfferingId"]
arns = {
    "model": sm.describe_model(ModelName="m")["ModelArn"],
    "config": sm.describe_endpoint_config(EndpointConfigName="cpu")["EndpointConfigArn"],
    "endpoint": sm.describe_endpoint(EndpointName="cpu")["EndpointArn"],
    "plan": sm.create_training_plan(TrainingPlanName="plan", TrainingPlanOfferingId=offer)["TrainingPlanArn"],
    "cluster": sm.describe_cluster(ClusterName="ml-cluster")["ClusterArn"],
}
for kind, arn in arns.items():
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "owner", "Value": kind}, {"Key": "team", "Value": "infra"}])
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    check(tags == {"owner": kind, "team": "infra"}, f"{kind} tags {tags}")
    sm.delete_tags(ResourceArn=arn, TagKeys=["owner"])
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    check(tags == {"team": "infra"}, f"{kind} tags after delete {tags}")
expect("ValidationException", "tags.1.member.key", sm.add_tags, ResourceArn=arns["model"], Tags=[{"Key": "k" * 129, "Value": "v"}])
print("tags round trip on", ", ".join(arns))

# 3. Serverless: 0 -> 2 -> 0, throttled past MaxConcurrency.
endpoint("sl", "m", {"ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 2}})
in_service("sl")
count = lambda: sm.describe_endpoint(EndpointName="sl")["ProductionVariants"][0].get("CurrentInstanceCount", 0)
check(count() == 0, f"serverless InService with {count()} replicas")
invoke("sl")
results = []
calls = [threading.Thread(target=lambda: results.append(invoke("sl", 1500))) for _ in range(2)]
for c in calls:
    c.start()
def in_flight():
    text = subprocess.run(["curl", "-s", url + "/metrics"], capture_output=True, text=True).stdout
    return sum(float(l.split()[-1]) for l in text.splitlines()
               if l.startswith("capstan_gateway_in_flight_requests{") and 'endpoint="sl"' in l) >= 2
poll("two requests in flight", in_flight)
expect("ThrottlingException", "concurrent", smr.invoke_endpoint, EndpointName="sl", ContentType="application/json",
       Body=json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 4}}))
for c in calls:
    c.join()
check(len(results) == 2, "a call within MaxConcurrency failed")
check(count() == 2, f"{count()} serverless replicas under two requests, want 2")
subprocess.run([os.environ["CAPSTAN_BIN"], "clock", "advance", "6m", "--server", url], check=True, capture_output=True)
poll("serverless back to 0 replicas", lambda: count() == 0)
print("serverless 0 -> 2 -> 0, third concurrent call throttled")

# 4. Async: output in S3.
s3.create_bucket(Bucket="async")
s3.put_object(Bucket="async", Key="in/req.json", Body=json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 8}}))
sm.create_endpoint_config(EndpointConfigName="as", ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "m",
    "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1}],
    AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": "s3://async/out", "S3FailurePath": "s3://async/fail"}})
sm.create_endpoint(EndpointName="as", EndpointConfigName="as")
in_service("as")
acc = smr.invoke_endpoint_async(EndpointName="as", InputLocation="s3://async/in/req.json", ContentType="application/json")
check(acc["OutputLocation"] == f"s3://async/out/{acc['InferenceId']}.out", f"OutputLocation {acc}")
def output():
    try:
        return s3.get_object(Bucket="async", Key=f"out/{acc['InferenceId']}.out")["Body"].read()
    except ClientError:
        return None
check(len(poll("async output in S3", output)) > 0, "empty async output")
print("async output at", acc["OutputLocation"])

# 5. A model from an S3 archive that no catalog knows.
config = {"_name_or_path": "acme/custom-3b", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
          "hidden_size": 2560, "intermediate_size": 8960, "num_hidden_layers": 30, "num_attention_heads": 20,
          "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 50000, "max_position_embeddings": 16384,
          "torch_dtype": "bfloat16"}
def archive(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()
s3.create_bucket(Bucket="models")
s3.put_object(Bucket="models", Key="custom/model.tar.gz", Body=archive({"config.json": json.dumps(config).encode()}))
s3.put_object(Bucket="models", Key="bad/model.tar.gz", Body=archive({"weights.bin": b"\0" * 16}))
expect("ValidationException", "has no config.json", sm.create_model, ModelName="bad", ExecutionRoleArn=role,
       PrimaryContainer={"Image": "capstan/sim", "ModelDataUrl": "s3://models/bad/model.tar.gz"})
check(not sm.list_models(NameContains="bad")["Models"], "a refused model was stored")
sm.create_model(ModelName="custom", ExecutionRoleArn=role,
                PrimaryContainer={"Image": "capstan/sim", "ModelDataUrl": "s3://models/custom/model.tar.gz"})
endpoint("custom", "custom", {"InstanceType": "ml.g5.2xlarge", "InitialInstanceCount": 1})
in_service("custom")
check(len(invoke("custom")) > 0, "empty answer from the S3 model")
print("model from s3://models/custom/model.tar.gz (30 layers, in no catalog) answered")
PY
echo "fidelity_boto3_flow: PASS"
