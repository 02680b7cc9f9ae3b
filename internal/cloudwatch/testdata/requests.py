"""Regenerates the request files of the golden wire tests with botocore's
own serializers (python3 requests.py, from this directory)."""
import datetime
import json
from urllib.parse import urlencode

from botocore import serialize
from botocore.session import get_session

UTC = datetime.timezone.utc
DIMS = [{"Name": "EndpointName", "Value": "e1"}, {"Name": "VariantName", "Value": "AllTraffic"}]
START = datetime.datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
END = datetime.datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
CALLS = {
    "GetMetricStatistics": {"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency", "Dimensions": DIMS,
                            "StartTime": START, "EndTime": END, "Period": 60,
                            "Statistics": ["Average", "SampleCount", "Maximum"]},
    "GetMetricData": {"StartTime": START, "EndTime": END, "ScanBy": "TimestampAscending", "MetricDataQueries": [
        {"Id": "inv", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": DIMS},
                                     "Period": 60, "Stat": "Sum"}},
        {"Id": "p90", "Label": "p90 latency", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
                                                                         "Dimensions": DIMS}, "Period": 3600, "Stat": "p90"}}]},
    "ListMetrics": {"Namespace": "AWS/SageMaker", "Dimensions": [{"Name": "EndpointName", "Value": "e1"}]},
    # An error: a period that is not a multiple of 60.
    "GetMetricStatistics.error": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": DIMS,
                                  "StartTime": START, "EndTime": END, "Period": 90, "Statistics": ["Sum"]},
}
model = get_session().get_service_model("cloudwatch")
for proto, ext in (("smithy-rpc-v2-cbor", "cbor"), ("json", "json"), ("query", "query")):
    ser = serialize.create_serializer(proto)
    for name, params in CALLS.items():
        req = ser.serialize_to_request(params, model.operation_model(name.split(".")[0]))
        body = req["body"]
        if isinstance(body, dict):
            body = urlencode(body)
        if isinstance(body, str):
            body = body.encode()
        with open(f"{ext}_{name}.request", "wb") as f:
            f.write(json.dumps({"path": req["url_path"], "headers": dict(req["headers"])}, sort_keys=True).encode() + b"\n" + body)
