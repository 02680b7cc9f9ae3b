package cloudwatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var epDims = []Dimension{{"EndpointName", "e1"}, {"VariantName", "AllTraffic"}}

// fixture: a store on a fake clock holding, from t0, one invocation a
// second for 120 s (ModelLatency 1000..120000 µs), then the clock at
// t0+10m.
func fixture(t testing.TB) (*Service, *metricstore.Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	st := metricstore.New(clk, metricstore.Options{})
	dims := storeDims(epDims)
	for i := range 120 {
		if err := st.Record(NamespaceSageMaker, "Invocations", dims, 1); err != nil {
			t.Fatal(err)
		}
		if err := st.Record(NamespaceSageMaker, "ModelLatency", dims, float64(i+1)*1000); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	if err := st.Record(NamespaceSageMaker, "Invocations", storeDims([]Dimension{{"EndpointName", "e2"}, {"VariantName", "AllTraffic"}}), 1); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(10 * time.Minute))
	return NewService(st, Options{Clock: clk, AccountID: "123456789012"}), st, clk
}

func i64(v int64) *int64 { return &v }

func gms(mut func(*GetMetricStatisticsInput)) *GetMetricStatisticsInput {
	in := &GetMetricStatisticsInput{Namespace: NamespaceSageMaker, MetricName: "Invocations", Dimensions: epDims,
		StartTime: tsp(t0.Add(-time.Hour)), EndTime: tsp(t0.Add(time.Hour)), Period: i64(60), Statistics: []string{"Sum"}}
	if mut != nil {
		mut(in)
	}
	return in
}

func wantErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("err = %v, want %s", err, code)
	}
	if we.Code != code || !strings.Contains(we.Message, msg) {
		t.Fatalf("err = %s: %s, want %s containing %q", we.Code, we.Message, code, msg)
	}
}

func TestGetMetricStatisticsValidation(t *testing.T) {
	svc, _, _ := fixture(t)
	for _, tc := range []struct {
		name      string
		mut       func(*GetMetricStatisticsInput)
		code, msg string
	}{
		{"no namespace", func(in *GetMetricStatisticsInput) { in.Namespace = "" }, CodeMissingParameter, "The parameter Namespace is required."},
		{"no metric", func(in *GetMetricStatisticsInput) { in.MetricName = "" }, CodeMissingParameter, "The parameter MetricName is required."},
		{"long namespace", func(in *GetMetricStatisticsInput) { in.Namespace = strings.Repeat("n", 256) }, CodeInvalidParameterValue, "at 'namespace' failed to satisfy constraint: Member must have length less than or equal to 255"},
		{"colon namespace", func(in *GetMetricStatisticsInput) { in.Namespace = ":x" }, CodeInvalidParameterValue, "regular expression pattern"},
		{"no start", func(in *GetMetricStatisticsInput) { in.StartTime = nil }, CodeMissingParameter, "StartTime"},
		{"no end", func(in *GetMetricStatisticsInput) { in.EndTime = nil }, CodeMissingParameter, "EndTime"},
		{"start after end", func(in *GetMetricStatisticsInput) { in.StartTime, in.EndTime = in.EndTime, in.StartTime },
			CodeInvalidParameterValue, "The parameter StartTime must be less than the parameter EndTime."},
		{"start equals end", func(in *GetMetricStatisticsInput) { in.EndTime = in.StartTime }, CodeInvalidParameterValue, "must be less than"},
		{"no period", func(in *GetMetricStatisticsInput) { in.Period = nil }, CodeMissingParameter, "Period"},
		{"period 0", func(in *GetMetricStatisticsInput) { in.Period = i64(0) }, CodeInvalidParameterValue, "greater than or equal to 1"},
		{"period negative", func(in *GetMetricStatisticsInput) { in.Period = i64(-60) }, CodeInvalidParameterValue, "greater than or equal to 1"},
		{"period 7", func(in *GetMetricStatisticsInput) { in.Period = i64(7) }, CodeInvalidParameterValue, "must be 1, 5, 10, 30, or a multiple of 60"},
		{"period 61", func(in *GetMetricStatisticsInput) { in.Period = i64(61) }, CodeInvalidParameterValue, "The parameter Period must be a multiple of 60."},
		{"period huge", func(in *GetMetricStatisticsInput) { in.Period = i64(math.MaxInt64) }, CodeInvalidParameterValue, "at most"},
		{"no statistic", func(in *GetMetricStatisticsInput) { in.Statistics = nil }, CodeInvalidParameterCombination, "At least one of the parameters Statistics and ExtendedStatistics"},
		{"both statistics", func(in *GetMetricStatisticsInput) { in.ExtendedStatistics = []string{"p99"} }, CodeInvalidParameterCombination, "mutually exclusive"},
		{"unknown statistic", func(in *GetMetricStatisticsInput) { in.Statistics = []string{"Sum", "Median"} }, CodeInvalidParameterValue,
			"Value 'Median' at 'statistics.2.member' failed to satisfy constraint: Member must satisfy enum value set"},
		{"six statistics", func(in *GetMetricStatisticsInput) { in.Statistics = append(basicStats, "Sum") }, CodeInvalidParameterValue, "length less than or equal to 5"},
		{"bad percentile", func(in *GetMetricStatisticsInput) { in.Statistics, in.ExtendedStatistics = nil, []string{"p101"} }, CodeInvalidParameterValue, "ExtendedStatistics.member.1"},
		{"trimmed mean", func(in *GetMetricStatisticsInput) { in.Statistics, in.ExtendedStatistics = nil, []string{"tm99"} }, CodeInvalidParameterValue, "pNN"},
		{"bad unit", func(in *GetMetricStatisticsInput) { in.Unit = "Parsecs" }, CodeInvalidParameterValue, "at 'unit'"},
		{"too many datapoints", func(in *GetMetricStatisticsInput) { in.Period = i64(1) }, CodeInvalidParameterCombination,
			"You have requested up to 7,200 datapoints, which exceeds the limit of 1,440. You may reduce the datapoints requested by increasing Period, or decreasing the time range."},
		{"1441 datapoints", func(in *GetMetricStatisticsInput) { in.StartTime, in.EndTime = tsp(t0), tsp(t0.Add(1441*time.Minute)) }, CodeInvalidParameterCombination, "up to 1,441 datapoints"},
		{"no dimension value", func(in *GetMetricStatisticsInput) { in.Dimensions = []Dimension{{Name: "EndpointName"}} }, CodeMissingParameter, "Dimensions.member.1.Value"},
		{"31 dimensions", func(in *GetMetricStatisticsInput) {
			in.Dimensions = nil
			for i := range 31 {
				in.Dimensions = append(in.Dimensions, Dimension{fmt.Sprint("d", i), "v"})
			}
		}, CodeInvalidParameterValue, "length less than or equal to 30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.GetMetricStatistics(context.Background(), gms(tc.mut))
			wantErr(t, err, tc.code, tc.msg)
		})
	}
	// 1,440 periods exactly is allowed.
	if _, err := svc.GetMetricStatistics(context.Background(), gms(func(in *GetMetricStatisticsInput) {
		in.StartTime, in.EndTime = tsp(t0), tsp(t0.Add(1440*time.Minute))
	})); err != nil {
		t.Fatal(err)
	}
}

func TestGetMetricStatisticsAnswers(t *testing.T) {
	svc, _, _ := fixture(t)
	ctx := context.Background()
	out, err := svc.GetMetricStatistics(ctx, gms(func(in *GetMetricStatisticsInput) {
		in.Statistics = basicStats
	}))
	if err != nil {
		t.Fatal(err)
	}
	if out.Label != "Invocations" || len(out.Datapoints) != 2 {
		t.Fatalf("got %+v", out)
	}
	for i, dp := range out.Datapoints {
		if !dp.Timestamp.Equal(t0.Add(time.Duration(i)*time.Minute)) || *dp.Sum != 60 || *dp.SampleCount != 60 || *dp.Average != 1 ||
			*dp.Minimum != 1 || *dp.Maximum != 1 || dp.Unit != "None" {
			t.Fatalf("datapoint %d: %+v", i, dp)
		}
	}
	// Latency: average and percentiles in microseconds, over one period.
	out, err = svc.GetMetricStatistics(ctx, gms(func(in *GetMetricStatisticsInput) {
		in.MetricName, in.Period, in.Statistics, in.ExtendedStatistics = "ModelLatency", i64(3600), nil, []string{"p50", "p99.5", "p100", "p0"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Datapoints) != 1 || out.Datapoints[0].Unit != "Microseconds" {
		t.Fatalf("got %+v", out)
	}
	ext := out.Datapoints[0].ExtendedStatistics
	if math.Abs(float64(ext["p50"])-60000) > 1500 || ext["p100"] != 120000 || ext["p0"] != 1000 || math.Abs(float64(ext["p99.5"])-120000) > 2500 {
		t.Fatalf("percentiles %v", ext)
	}
	for _, tc := range []struct {
		name string
		mut  func(*GetMetricStatisticsInput)
	}{
		{"unknown namespace", func(in *GetMetricStatisticsInput) { in.Namespace = "AWS/Nope" }},
		{"unknown metric", func(in *GetMetricStatisticsInput) { in.MetricName = "Nope" }},
		{"other dimensions", func(in *GetMetricStatisticsInput) { in.Dimensions = epDims[:1] }},
		{"other unit", func(in *GetMetricStatisticsInput) { in.Unit = "Count" }},
		{"before the data", func(in *GetMetricStatisticsInput) { in.StartTime, in.EndTime = tsp(t0.Add(-2*time.Hour)), tsp(t0) }},
	} {
		out, err := svc.GetMetricStatistics(ctx, gms(tc.mut))
		if err != nil || out.Datapoints == nil || len(out.Datapoints) != 0 {
			t.Fatalf("%s: %+v, %v; want no datapoints", tc.name, out, err)
		}
	}
	// The matching unit answers.
	if out, err := svc.GetMetricStatistics(ctx, gms(func(in *GetMetricStatisticsInput) { in.Unit = "None" })); err != nil || len(out.Datapoints) != 2 {
		t.Fatalf("unit None: %+v, %v", out, err)
	}
	// A start within a minute rounds down to it: the first period still
	// starts at t0.
	out, err = svc.GetMetricStatistics(ctx, gms(func(in *GetMetricStatisticsInput) { in.StartTime = tsp(t0.Add(30 * time.Second)) }))
	if err != nil || len(out.Datapoints) != 2 || !out.Datapoints[0].Timestamp.Equal(t0) || *out.Datapoints[0].Sum != 60 {
		t.Fatalf("rounded start: %+v, %v", out, err)
	}
}

func bp(b bool) *bool { return &b }

func mdq(id, metric, stat string, period int64) MetricDataQuery {
	return MetricDataQuery{Id: id, MetricStat: &MetricStat{Metric: &Metric{Namespace: NamespaceSageMaker, MetricName: metric, Dimensions: epDims},
		Period: i64(period), Stat: stat}}
}

func gmd(qs ...MetricDataQuery) *GetMetricDataInput {
	return &GetMetricDataInput{MetricDataQueries: qs, StartTime: tsp(t0.Add(-time.Hour)), EndTime: tsp(t0.Add(time.Hour))}
}

func TestGetMetricDataValidation(t *testing.T) {
	svc, _, _ := fixture(t)
	for _, tc := range []struct {
		name      string
		in        *GetMetricDataInput
		code, msg string
	}{
		{"no queries", gmd(), CodeMissingParameter, "MetricDataQueries"},
		{"no id", gmd(mdq("", "Invocations", "Sum", 60)), CodeMissingParameter, "MetricDataQueries.member.1.Id"},
		{"upper-case id", gmd(mdq("M1", "Invocations", "Sum", 60)), CodeInvalidParameterValue, "Id is not valid"},
		{"duplicate id", gmd(mdq("m1", "Invocations", "Sum", 60), mdq("m1", "ModelLatency", "Sum", 60)), CodeInvalidParameterValue, "MetricDataQueries.member.2.Id"},
		{"expression", gmd(MetricDataQuery{Id: "e1", Expression: "SUM(METRICS())"}), CodeInvalidParameterValue, "metric math expressions are not supported"},
		{"neither", gmd(MetricDataQuery{Id: "e1"}), CodeInvalidParameterCombination, "Exactly one of"},
		{"bad stat", gmd(mdq("m1", "Invocations", "Median", 60)), CodeInvalidParameterValue, "MetricStat.Stat is not supported"},
		{"bad period", gmd(mdq("m1", "Invocations", "Sum", 90)), CodeInvalidParameterValue, "MetricDataQueries.member.1.MetricStat.Period must be a multiple of 60"},
		{"no metric", gmd(MetricDataQuery{Id: "m1", MetricStat: &MetricStat{Period: i64(60), Stat: "Sum"}}), CodeMissingParameter, "MetricStat.Metric"},
		{"nothing returned", gmd(func() MetricDataQuery { q := mdq("m1", "Invocations", "Sum", 60); q.ReturnData = bp(false); return q }()),
			CodeInvalidParameterValue, "ReturnData"},
		{"other account", gmd(func() MetricDataQuery { q := mdq("m1", "Invocations", "Sum", 60); q.AccountId = "999"; return q }()),
			CodeInvalidParameterValue, "AccountId"},
		{"bad scan", func() *GetMetricDataInput {
			in := gmd(mdq("m1", "Invocations", "Sum", 60))
			in.ScanBy = "Sideways"
			return in
		}(),
			CodeInvalidParameterValue, "scanBy"},
		{"max datapoints 0", func() *GetMetricDataInput {
			in := gmd(mdq("m1", "Invocations", "Sum", 60))
			in.MaxDatapoints = i64(0)
			return in
		}(),
			CodeInvalidParameterValue, "MaxDatapoints"},
		{"max datapoints huge", func() *GetMetricDataInput {
			in := gmd(mdq("m1", "Invocations", "Sum", 60))
			in.MaxDatapoints = i64(math.MaxInt64)
			return in
		}(), CodeInvalidParameterValue, "MaxDatapoints"},
		{"bad token", func() *GetMetricDataInput {
			in := gmd(mdq("m1", "Invocations", "Sum", 60))
			in.NextToken = "xyz"
			return in
		}(),
			CodeInvalidNextToken, "NextToken"},
		{"reversed range", func() *GetMetricDataInput {
			in := gmd(mdq("m1", "Invocations", "Sum", 60))
			in.StartTime, in.EndTime = in.EndTime, in.StartTime
			return in
		}(), CodeInvalidParameterValue, "StartTime must be less than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.GetMetricData(context.Background(), tc.in)
			wantErr(t, err, tc.code, tc.msg)
		})
	}
	qs := make([]MetricDataQuery, MaxQueries+1)
	for i := range qs {
		qs[i] = mdq(fmt.Sprint("m", i), "Invocations", "Sum", 60)
	}
	_, err := svc.GetMetricData(context.Background(), gmd(qs...))
	wantErr(t, err, CodeInvalidParameterValue, "500")
}

func TestGetMetricDataPagesAndOrders(t *testing.T) {
	svc, _, _ := fixture(t)
	ctx := context.Background()
	hidden := mdq("hidden", "Invocations", "Sum", 60)
	hidden.ReturnData = bp(false)
	lat := mdq("lat", "ModelLatency", "Maximum", 60)
	lat.Label = "max latency"
	in := gmd(mdq("inv", "Invocations", "Sum", 10), hidden, lat, mdq("none", "Nope", "Sum", 60))
	out, err := svc.GetMetricData(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.MetricDataResults) != 3 || out.NextToken != "" {
		t.Fatalf("got %+v", out)
	}
	inv, l, none := out.MetricDataResults[0], out.MetricDataResults[1], out.MetricDataResults[2]
	if inv.Id != "inv" || inv.Label != "Invocations" || len(inv.Values) != 12 || inv.StatusCode != "Complete" {
		t.Fatalf("inv %+v", inv)
	}
	// Descending by default.
	if !inv.Timestamps[0].Equal(t0.Add(110*time.Second)) || !inv.Timestamps[11].Equal(t0) || inv.Values[0] != 10 {
		t.Fatalf("inv order %+v", inv)
	}
	if l.Label != "max latency" || len(l.Values) != 2 || l.Values[0] != 120000 || l.Values[1] != 60000 {
		t.Fatalf("lat %+v", l)
	}
	if none.Id != "none" || len(none.Values) != 0 || none.Values == nil || none.StatusCode != "Complete" {
		t.Fatalf("none %+v", none)
	}
	// Pages of 5 points, ascending: every point exactly once, in order.
	in.ScanBy, in.MaxDatapoints = "TimestampAscending", i64(5)
	var got []string
	pages := 0
	for {
		out, err := svc.GetMetricData(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range out.MetricDataResults {
			for i, ts := range r.Timestamps {
				got = append(got, fmt.Sprintf("%s@%d=%g", r.Id, ts.Unix()-t0.Unix(), r.Values[i]))
			}
		}
		if out.NextToken == "" {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		in.NextToken = out.NextToken
	}
	want := []string{}
	for i := range 12 {
		want = append(want, fmt.Sprintf("inv@%d=10", i*10))
	}
	want = append(want, "lat@0=60000", "lat@60=120000")
	if fmt.Sprint(got) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("pages %d:\n got %v\nwant %v", pages, got, want)
	}
	// A token is only good for the request that made it.
	other := gmd(mdq("x", "Invocations", "Sum", 60))
	other.NextToken = in.NextToken
	if _, err := svc.GetMetricData(ctx, other); err == nil {
		t.Fatal("a token from another request was accepted")
	}
}

func TestListMetrics(t *testing.T) {
	svc, st, clk := fixture(t)
	ctx := context.Background()
	names := func(out *ListMetricsOutput) []string {
		var s []string
		for _, m := range out.Metrics {
			d := []string{}
			for _, x := range m.Dimensions {
				d = append(d, x.Name+"="+x.Value)
			}
			s = append(s, m.Namespace+" "+m.MetricName+" "+strings.Join(d, ","))
		}
		return s
	}
	e2 := "e2"
	for _, tc := range []struct {
		name string
		in   ListMetricsInput
		want string
	}{
		{"all", ListMetricsInput{}, "[AWS/SageMaker Invocations EndpointName=e1,VariantName=AllTraffic AWS/SageMaker Invocations EndpointName=e2,VariantName=AllTraffic AWS/SageMaker ModelLatency EndpointName=e1,VariantName=AllTraffic]"},
		{"metric", ListMetricsInput{Namespace: NamespaceSageMaker, MetricName: "ModelLatency"}, "[AWS/SageMaker ModelLatency EndpointName=e1,VariantName=AllTraffic]"},
		{"dimension value", ListMetricsInput{Dimensions: []DimensionFilter{{Name: "EndpointName", Value: &e2}}}, "[AWS/SageMaker Invocations EndpointName=e2,VariantName=AllTraffic]"},
		{"dimension name", ListMetricsInput{Dimensions: []DimensionFilter{{Name: "Nope"}}}, "[]"},
		{"unknown namespace", ListMetricsInput{Namespace: "AWS/EC2"}, "[]"},
		{"recently active", ListMetricsInput{MetricName: "ModelLatency", RecentlyActive: "PT3H"}, "[AWS/SageMaker ModelLatency EndpointName=e1,VariantName=AllTraffic]"},
		{"other account", ListMetricsInput{OwningAccount: "999999999999"}, "[]"},
	} {
		out, err := svc.ListMetrics(ctx, &tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := fmt.Sprint(names(out)); got != tc.want || out.Metrics == nil {
			t.Fatalf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	out, err := svc.ListMetrics(ctx, &ListMetricsInput{MetricName: "ModelLatency", IncludeLinkedAccounts: bp(true)})
	if err != nil || fmt.Sprint(out.OwningAccounts) != "[123456789012]" {
		t.Fatalf("linked accounts: %+v, %v", out, err)
	}
	for _, tc := range []struct {
		in        ListMetricsInput
		code, msg string
	}{
		{ListMetricsInput{RecentlyActive: "PT1H"}, CodeInvalidParameterValue, "[PT3H]"},
		{ListMetricsInput{NextToken: "!!"}, CodeInvalidParameterValue, "NextToken"},
		{ListMetricsInput{Dimensions: []DimensionFilter{{}}}, CodeMissingParameter, "Dimensions.member.1.Name"},
		{ListMetricsInput{Dimensions: make([]DimensionFilter, 11)}, CodeInvalidParameterValue, "less than or equal to 10"},
	} {
		_, err := svc.ListMetrics(ctx, &tc.in)
		wantErr(t, err, tc.code, tc.msg)
	}
	// Paging: 1,203 series come back 500 at a time, each once.
	for i := range 1200 {
		if err := st.Record("Test", "M", []metricstore.Dimension{{Name: "i", Value: fmt.Sprintf("%04d", i)}}, 1); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	in := &ListMetricsInput{}
	for pages := 1; ; pages++ {
		out, err := svc.ListMetrics(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Metrics) > ListPageSize {
			t.Fatalf("page of %d", len(out.Metrics))
		}
		for _, n := range names(out) {
			if seen[n] {
				t.Fatalf("%s twice", n)
			}
			seen[n] = true
		}
		if out.NextToken == "" {
			if pages != 3 || len(seen) != 1203 {
				t.Fatalf("%d pages, %d metrics", pages, len(seen))
			}
			break
		}
		in.NextToken = out.NextToken
	}
	// Four hours on, the metrics are still listed (the per-minute tier keeps
	// them 15 days) but not as recently active; past 15 days nothing is.
	clk.Step(4 * time.Hour)
	if out, err := svc.ListMetrics(ctx, &ListMetricsInput{Namespace: NamespaceSageMaker}); err != nil || len(out.Metrics) != 3 {
		t.Fatalf("after 4h: %v, %v", names(out), err)
	}
	if out, err := svc.ListMetrics(ctx, &ListMetricsInput{Namespace: NamespaceSageMaker, RecentlyActive: "PT3H"}); err != nil || len(out.Metrics) != 0 {
		t.Fatalf("recently active after 4h: %v, %v", names(out), err)
	}
	clk.Step(metricstore.MinuteRetention)
	if out, err := svc.ListMetrics(ctx, &ListMetricsInput{Namespace: NamespaceSageMaker}); err != nil || len(out.Metrics) != 0 {
		t.Fatalf("after 15 days: %v, %v", names(out), err)
	}
}
