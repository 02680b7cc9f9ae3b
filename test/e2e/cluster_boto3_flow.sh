#!/usr/bin/env bash
# HyperPod clusters through boto3 against `capstan serve --dev-clock`:
# create_cluster, the list_clusters and list_cluster_nodes paginators,
# describe_cluster_node, update_cluster, batch_delete_cluster_nodes and
# delete_cluster, and errors arriving as botocore ClientError with the
# right Error.Code. botocore has no cluster waiter (its sagemaker waiters
# are for endpoints, images, notebooks and jobs), so the script polls.
# Needs CAPSTAN_BIN, python3 with boto3. Under 30 s (nodes launch in 1s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cat >"$work/capstan.yaml" <<'YAML'
cluster:
  launchTime: 1s
  spot: {meanTimeToInterruption: -1s}
YAML
serve_args=(--config "$work/capstan.yaml")
# shellcheck source=lib/serve.sh
source "$here/lib/serve.sh"
python3 -c 'import boto3' 2>/dev/null || fail "python3 with boto3 is required"

CAPSTAN_URL=$url python3 - <<'PY' || fail "boto3 flow"
import os, sys, time
import boto3
from botocore.exceptions import ClientError

sm = boto3.client("sagemaker", endpoint_url=os.environ["CAPSTAN_URL"], region_name="us-east-1",
                  aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
role = "arn:aws:iam::000000000000:role/hyperpod-exec"

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

def expect(code, fn, **kw):
    try:
        fn(**kw)
    except ClientError as e:
        check(e.response["Error"]["Code"] == code, f"{fn.__name__}: got {e.response['Error']}, want {code}")
        return e.response["Error"]["Message"]
    check(False, f"{fn.__name__} succeeded, want {code}")

def poll(what, cond, timeout=20):
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        check(time.time() < deadline, what)
        time.sleep(0.1)

def group(name, count, typ="ml.g5.8xlarge"):
    return {"InstanceGroupName": name, "InstanceType": typ, "InstanceCount": count, "ExecutionRole": role,
            "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle", "OnCreate": "on_create.sh"}}

def status(name):
    return sm.describe_cluster(ClusterName=name)["ClusterStatus"]

def nodes(name):
    out = []
    for page in sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name, PaginationConfig={"PageSize": 1}):
        check(len(page["ClusterNodeSummaries"]) <= 1, "a node page over PageSize 1")
        out += page["ClusterNodeSummaries"]
    return out

def clusters(**kw):
    out = []
    for page in sm.get_paginator("list_clusters").paginate(PaginationConfig={"PageSize": 1}, **kw):
        check(len(page["ClusterSummaries"]) <= 1, "a cluster page over PageSize 1")
        out += [c["ClusterName"] for c in page["ClusterSummaries"]]
    return out

# Errors: ClientError with the wire's code.
msg = expect("ValidationException", sm.create_cluster, ClusterName="bad", InstanceGroups=[group("a", 1, "ml.nope.48xlarge")])
check("InstanceGroups[0].InstanceType" in msg, f"unknown type message: {msg}")
expect("ResourceNotFound", sm.describe_cluster, ClusterName="nope")
expect("ResourceLimitExceeded", sm.create_cluster, ClusterName="huge", InstanceGroups=[group("a", 1000, "ml.p5.48xlarge")])
check(clusters() == ["ml-cluster"], f"a refused create left a cluster: {clusters()}")

arn = sm.create_cluster(ClusterName="bt-cluster", InstanceGroups=[group("workers", 2), group("spare", 0)],
                        NodeRecovery="Automatic")["ClusterArn"]
check(arn.startswith("arn:aws:sagemaker:us-east-1:000000000000:cluster/"), f"ClusterArn {arn}")
expect("ResourceInUse", sm.create_cluster, ClusterName="bt-cluster", InstanceGroups=[group("a", 0)])
# botocore has no cluster waiter: poll DescribeCluster instead.
poll("bt-cluster not InService", lambda: status("bt-cluster") == "InService")
d = sm.describe_cluster(ClusterName=arn)
g = {x["InstanceGroupName"]: x for x in d["InstanceGroups"]}
check(g["workers"]["CurrentCount"] == 2 and g["workers"]["TargetCount"] == 2 and g["spare"]["TargetCount"] == 0,
      f"groups {d['InstanceGroups']}")
check(d["NodeRecovery"] == "Automatic", f"NodeRecovery {d.get('NodeRecovery')}")

check(clusters() == ["ml-cluster", "bt-cluster"], f"list_clusters {clusters()}")
check(clusters(SortBy="NAME") == ["bt-cluster", "ml-cluster"], f"by name {clusters(SortBy='NAME')}")
check(clusters(NameContains="bt") == ["bt-cluster"], f"name contains {clusters(NameContains='bt')}")

ns = nodes("bt-cluster")
check(len(ns) == 2 and all(n["InstanceStatus"]["Status"] == "Running" for n in ns), f"nodes {ns}")
nd = sm.describe_cluster_node(ClusterName="bt-cluster", NodeId=ns[0]["InstanceId"])["NodeDetails"]
check(nd["InstanceId"] == ns[0]["InstanceId"] and nd["InstanceGroupName"] == "workers" and nd["InstanceType"] == "ml.g5.8xlarge"
      and nd["LaunchTime"] is not None and nd["PrivateDnsHostname"].endswith(".compute.internal"), f"node {nd}")
expect("ResourceNotFound", sm.describe_cluster_node, ClusterName="bt-cluster", NodeId="i-0123456789abcdef0")

sm.update_cluster(ClusterName="bt-cluster", InstanceGroups=[group("workers", 3)])
poll("third node not Running", lambda: sum(n["InstanceStatus"]["Status"] == "Running" for n in nodes("bt-cluster")) == 3)

gone = ns[0]["InstanceId"]
r = sm.batch_delete_cluster_nodes(ClusterName="bt-cluster", NodeIds=[gone, "i-0123456789abcdef0"])
check(r.get("Successful") == [gone], f"batch delete Successful {r}")
check([(f["NodeId"], f["Code"]) for f in r.get("Failed", [])] == [("i-0123456789abcdef0", "NodeIdNotFound")], f"batch delete Failed {r}")
poll(f"{gone} still listed", lambda: gone not in [n["InstanceId"] for n in nodes("bt-cluster")])

sm.delete_cluster(ClusterName="bt-cluster")
poll("bt-cluster not deleted", lambda: "bt-cluster" not in clusters())
expect("ResourceNotFound", sm.describe_cluster, ClusterName="bt-cluster")
print("boto3 cluster flow passed")
PY
echo "cluster boto3 flow passed"
