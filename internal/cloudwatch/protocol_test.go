package cloudwatch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProtocolErrors: what each protocol answers for requests the service
// never sees: unknown operations, unreadable bodies, oversized bodies, form
// lists out of range.
func TestProtocolErrors(t *testing.T) {
	_, st, clk := fixture(t)
	h := NewHandler(st, HandlerOptions{Clock: clk, MaxBodyBytes: 4096})
	cborHdr := map[string]string{"smithy-protocol": "rpc-v2-cbor", "Content-Type": "application/cbor"}
	jsonHdr := func(op string) map[string]string {
		return map[string]string{"X-Amz-Target": TargetPrefix + op, "Content-Type": "application/x-amz-json-1.0"}
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
		status     int
		want       string // in the body
		queryError string
	}{
		{"cbor unknown op", CBORPathPrefix + "PutMetricData", cborHdr, "", 404, "UnknownOperationException", "InvalidAction;Sender"},
		{"cbor no protocol header", CBORPathPrefix + "ListMetrics", map[string]string{}, "", 400, "smithy-protocol", "SerializationException;Sender"},
		{"cbor garbage", CBORPathPrefix + "ListMetrics", cborHdr, "\xff\xff", 400, "SerializationException", "SerializationException;Sender"},
		{"cbor too large", CBORPathPrefix + "ListMetrics", cborHdr, strings.Repeat("a", 5000), 413, "RequestEntityTooLarge", "RequestEntityTooLarge;Sender"},
		{"cbor empty body", CBORPathPrefix + "ListMetrics", cborHdr, "", 200, "Metrics", ""},
		{"json unknown op", "/", jsonHdr("DescribeAlarms"), "{}", 400, "UnknownOperationException", "InvalidAction;Sender"},
		{"json wrong type", "/", jsonHdr("GetMetricStatistics"), `{"Period":"sixty"}`, 400, "SerializationException", "SerializationException;Sender"},
		{"json timestamp out of range", "/", jsonHdr("GetMetricStatistics"), `{"StartTime":1e300}`, 400, "SerializationException", "SerializationException;Sender"},
		{"json missing namespace", "/", jsonHdr("GetMetricStatistics"), `{}`, 400, "MissingRequiredParameterException", "MissingParameter;Sender"},
		{"query unknown action", "/", form, "Action=PutMetricData&Version=2010-08-01", 400, "<Code>InvalidAction</Code>", ""},
		{"query wrong version", "/", form, "Action=ListMetrics&Version=2011-01-01", 400, "<Code>InvalidParameterValue</Code>", ""},
		{"query no action", "/", form, "Version=2010-08-01", 400, "<Code>MissingParameter</Code>", ""},
		{"query huge index", "/", form, "Action=ListMetrics&Version=2010-08-01&Dimensions.member.99999999999.Name=x", 400, "list members are numbered 1 to 1000", ""},
		{"query bad period", "/", form, "Action=GetMetricStatistics&Version=2010-08-01&Namespace=n&MetricName=m&StartTime=2026-03-01T00:00:00Z&EndTime=2026-03-01T01:00:00Z&Period=x",
			400, "must be an integer", ""},
		{"query bad time", "/", form, "Action=GetMetricStatistics&Version=2010-08-01&Namespace=n&MetricName=m&StartTime=yesterday", 400, "not ISO 8601", ""},
		{"query empty list", "/", form, "Action=ListMetrics&Version=2010-08-01&Dimensions=", 200, "<ListMetricsResult>", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			if !IsRequest(req) {
				t.Fatal("IsRequest is false")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) || rec.Header().Get("x-amzn-query-error") != tc.queryError {
				t.Fatalf("got %d %q (query error %q), want %d containing %q (%q)", rec.Code, rec.Body, rec.Header().Get("x-amzn-query-error"), tc.status, tc.want, tc.queryError)
			}
		})
	}
	// SageMaker's JSON 1.1 calls are not CloudWatch's.
	for _, hdr := range []map[string]string{
		{"X-Amz-Target": "SageMaker.ListEndpoints", "Content-Type": "application/x-amz-json-1.1"},
		{"X-Amz-Target": "AnyScaleFrontendService.DescribeScalableTargets", "Content-Type": "application/x-amz-json-1.1"},
		{"X-Amz-Target": "SageMaker.ListEndpoints", "Content-Type": "application/x-www-form-urlencoded"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if IsRequest(req) {
			t.Fatalf("%v is taken for CloudWatch", hdr)
		}
	}
}
