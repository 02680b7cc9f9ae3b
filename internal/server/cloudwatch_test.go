package server

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	cw "github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func (h *harness) cloudwatch(key, secret string) *cw.Client {
	return cw.New(cw.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.url), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, "")})
}

var cwDims = []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("e1")}, {Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}}

// TestCloudWatchSDK reads, with aws-sdk-go-v2's CloudWatch client (which
// speaks smithy-rpc-v2-cbor), what was put into the server's metric store:
// Invocations' Sum, ModelLatency's Average and percentiles, the metric list,
// GetMetricData; CloudWatch's errors arrive as the SDK's typed errors.
func TestCloudWatchSDK(t *testing.T) {
	h := startHarness(t, config.Config{})
	dims := []metricstore.Dimension{{Name: "EndpointName", Value: "e1"}, {Name: "VariantName", Value: "AllTraffic"}}
	const n = 7
	for i := range n {
		if err := h.srv.MetricStore.Record("AWS/SageMaker", "Invocations", dims, 1); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.MetricStore.Record("AWS/SageMaker", "ModelLatency", dims, float64(i+1)*1000); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	c := h.cloudwatch("AKIDTEST", "secret")
	now := h.srv.Clock.Now()
	start, end := now.Add(-30*time.Minute), now.Add(30*time.Minute)
	inv, err := c.GetMetricStatistics(ctx, &cw.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"),
		Dimensions: cwDims, StartTime: &start, EndTime: &end, Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, dp := range inv.Datapoints {
		sum += aws.ToFloat64(dp.Sum)
		if dp.Unit != cwtypes.StandardUnitNone || dp.Timestamp == nil || dp.Timestamp.Second() != 0 {
			t.Fatalf("datapoint %+v", dp)
		}
	}
	if sum != n || aws.ToString(inv.Label) != "Invocations" {
		t.Fatalf("Invocations Sum %v over %d datapoints, want %d", sum, len(inv.Datapoints), n)
	}
	lat, err := c.GetMetricStatistics(ctx, &cw.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"),
		Dimensions: cwDims, StartTime: &start, EndTime: &end, Period: aws.Int32(3600), Statistics: []cwtypes.Statistic{cwtypes.StatisticAverage, cwtypes.StatisticMaximum}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lat.Datapoints) != 1 || aws.ToFloat64(lat.Datapoints[0].Average) != 4000 || aws.ToFloat64(lat.Datapoints[0].Maximum) != 7000 ||
		lat.Datapoints[0].Unit != cwtypes.StandardUnitMicroseconds {
		t.Fatalf("ModelLatency %+v", lat.Datapoints)
	}
	p, err := c.GetMetricStatistics(ctx, &cw.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"),
		Dimensions: cwDims, StartTime: &start, EndTime: &end, Period: aws.Int32(3600), ExtendedStatistics: []string{"p50", "p99"}})
	if err != nil || len(p.Datapoints) != 1 || math.Abs(p.Datapoints[0].ExtendedStatistics["p50"]-4000) > 100 || p.Datapoints[0].ExtendedStatistics["p99"] != 7000 {
		t.Fatalf("percentiles %+v, %v", p, err)
	}
	data, err := c.GetMetricData(ctx, &cw.GetMetricDataInput{StartTime: &start, EndTime: &end, MetricDataQueries: []cwtypes.MetricDataQuery{
		{Id: aws.String("inv"), MetricStat: &cwtypes.MetricStat{Metric: &cwtypes.Metric{Namespace: aws.String("AWS/SageMaker"),
			MetricName: aws.String("Invocations"), Dimensions: cwDims}, Period: aws.Int32(3600), Stat: aws.String("SampleCount")}}}})
	if err != nil || len(data.MetricDataResults) != 1 || len(data.MetricDataResults[0].Values) != 1 || data.MetricDataResults[0].Values[0] != n ||
		data.MetricDataResults[0].StatusCode != cwtypes.StatusCodeComplete {
		t.Fatalf("GetMetricData %+v, %v", data, err)
	}
	list, err := c.ListMetrics(ctx, &cw.ListMetricsInput{Namespace: aws.String("AWS/SageMaker"),
		Dimensions: []cwtypes.DimensionFilter{{Name: aws.String("EndpointName"), Value: aws.String("e1")}}})
	if err != nil || len(list.Metrics) != 2 || aws.ToString(list.Metrics[1].MetricName) != "ModelLatency" {
		t.Fatalf("ListMetrics %+v, %v", list, err)
	}
	// An unknown namespace or metric is empty, not an error.
	for _, q := range [][2]string{{"AWS/Nope", "Invocations"}, {"AWS/SageMaker", "Nope"}} {
		out, err := c.GetMetricStatistics(ctx, &cw.GetMetricStatisticsInput{Namespace: aws.String(q[0]), MetricName: aws.String(q[1]),
			StartTime: &start, EndTime: &end, Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
		if err != nil || len(out.Datapoints) != 0 {
			t.Fatalf("%v: %+v, %v", q, out, err)
		}
	}
	// CloudWatch's errors, as the SDK's typed errors with the query codes.
	for _, tc := range []struct {
		in     cw.GetMetricStatisticsInput
		target any
		code   string
	}{
		{cw.GetMetricStatisticsInput{Period: aws.Int32(90)}, new(*cwtypes.InvalidParameterValueException), "InvalidParameterValue"},
		{cw.GetMetricStatisticsInput{StartTime: &end, EndTime: &start}, new(*cwtypes.InvalidParameterValueException), "InvalidParameterValue"},
		{cw.GetMetricStatisticsInput{Statistics: []cwtypes.Statistic{"Median"}}, new(*cwtypes.InvalidParameterValueException), "InvalidParameterValue"},
		{cw.GetMetricStatisticsInput{Period: aws.Int32(1)}, new(*cwtypes.InvalidParameterCombinationException), "InvalidParameterCombination"},
		{cw.GetMetricStatisticsInput{Namespace: aws.String("")}, new(*cwtypes.MissingRequiredParameterException), "MissingParameter"},
	} {
		in := cw.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"), StartTime: &start,
			EndTime: &end, Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}}
		if tc.in.Period != nil {
			in.Period = tc.in.Period
		}
		if tc.in.StartTime != nil {
			in.StartTime, in.EndTime = tc.in.StartTime, tc.in.EndTime
		}
		if tc.in.Statistics != nil {
			in.Statistics = tc.in.Statistics
		}
		if tc.in.Namespace != nil {
			in.Namespace = tc.in.Namespace
		}
		_, err := c.GetMetricStatistics(ctx, &in)
		var ae smithy.APIError
		if !errors.As(err, tc.target) || !errors.As(err, &ae) || ae.ErrorCode() != tc.code || ae.ErrorMessage() == "" {
			t.Fatalf("%+v: %v, want %T with code %s", tc.in, err, tc.target, tc.code)
		}
	}
	// The query protocol on the same port, next to SageMaker's JSON 1.1.
	form := url.Values{"Action": {"ListMetrics"}, "Version": {"2010-08-01"}, "MetricName": {"Invocations"}}
	resp, err := http.Post(h.url+"/", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<MetricName>Invocations</MetricName>") {
		t.Fatalf("query ListMetrics: %d %s", resp.StatusCode, body)
	}
	if _, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{}); err != nil {
		t.Fatalf("SageMaker next to CloudWatch: %v", err)
	}
}

// TestCloudWatchSigV4: with credentials configured, CloudWatch requires
// requests signed for the "monitoring" service.
func TestCloudWatchSigV4(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: sigv4Creds})
	ctx := context.Background()
	if _, err := h.cloudwatch("AKIDREAL", "s3cret").ListMetrics(ctx, &cw.ListMetricsInput{}); err != nil {
		t.Fatalf("signed: %v", err)
	}
	_, err := h.cloudwatch("AKIDREAL", "wrong").ListMetrics(ctx, &cw.ListMetricsInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Fatalf("wrong secret: %v", err)
	}
	// Unsigned query-protocol requests are refused too.
	resp, err := http.Post(h.url+"/", "application/x-www-form-urlencoded", strings.NewReader("Action=ListMetrics&Version=2010-08-01"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("unsigned query: %d", resp.StatusCode)
	}
	// Other authentication without credentials closes CloudWatch, in its
	// own protocol.
	closed := startHarness(t, config.Config{APIKeys: []string{testAPIKey}})
	_, err = closed.cloudwatch("AKIDREAL", "s3cret").ListMetrics(ctx, &cw.ListMetricsInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnrecognizedClientException" || !strings.Contains(ae.ErrorMessage(), "credentials") {
		t.Fatalf("closed: %v", err)
	}
}

// TestCloudWatchDevClock: under --dev-clock, data are recorded and read at
// the moved time: a sample recorded after advancing 48h is found around the
// server's now, not around the wall clock.
func TestCloudWatchDevClock(t *testing.T) {
	h := startHarness(t, config.Config{DevClock: true})
	dev, ok := h.srv.Clock.(*clock.Dev)
	if !ok {
		t.Fatalf("clock %T", h.srv.Clock)
	}
	if err := dev.Advance(48 * time.Hour); err != nil {
		t.Fatal(err)
	}
	dims := []metricstore.Dimension{{Name: "EndpointName", Value: "e1"}, {Name: "VariantName", Value: "AllTraffic"}}
	if err := h.srv.MetricStore.Record("AWS/SageMaker", "Invocations", dims, 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := h.cloudwatch("AKIDTEST", "secret")
	count := func(around time.Time) int {
		start, end := around.Add(-time.Hour), around.Add(time.Hour)
		out, err := c.GetMetricStatistics(ctx, &cw.GetMetricStatisticsInput{Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocations"),
			Dimensions: cwDims, StartTime: &start, EndTime: &end, Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticSum}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Datapoints)
	}
	if n := count(h.srv.Clock.Now()); n != 1 {
		t.Fatalf("around the server's now: %d datapoints, want 1", n)
	}
	if n := count(time.Now()); n != 0 {
		t.Fatalf("around the wall clock: %d datapoints, want 0", n)
	}
}

// TestCloudWatchThrottled: the rate limiter's refusal (of a configured
// credential past its burst) reaches a CBOR client as a ThrottlingException
// it can read.
func TestCloudWatchThrottled(t *testing.T) {
	cfg := config.Config{Credentials: sigv4Creds}
	cfg.Limits.RateLimit = config.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
	h := startHarness(t, cfg)
	c := h.cloudwatch("AKIDREAL", "s3cret")
	ctx := context.Background()
	var err error
	for range 3 {
		if _, err = c.ListMetrics(ctx, &cw.ListMetricsInput{}); err != nil {
			break
		}
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Fatalf("third call: %v, want ThrottlingException", err)
	}
}
