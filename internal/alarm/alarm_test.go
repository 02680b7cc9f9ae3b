package alarm

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func() Alarm {
		return Alarm{Name: "high-errors", Metric: "capstan_gateway_requests_total", Labels: map[string]string{"status": "5xx"}, Comparison: GreaterThanThreshold, Threshold: 5}
	}
	with := func(f func(a *Alarm)) []Alarm {
		a := ok()
		f(&a)
		return []Alarm{a}
	}
	many := func(n int) []Alarm {
		as := make([]Alarm, n)
		for i := range as {
			as[i] = ok()
			as[i].Name = fmt.Sprintf("a%d", i)
		}
		return as
	}
	manyLabels := map[string]string{}
	for i := range MaxLabels + 1 {
		manyLabels[fmt.Sprintf("l%d", i)] = "x"
	}
	tests := []struct {
		name    string
		alarms  []Alarm
		wantErr string // substring; "" = valid
	}{
		{"none", nil, ""},
		{"valid", []Alarm{ok()}, ""},
		{"every statistic and comparison", []Alarm{
			{Name: "a", Metric: "m", Statistic: Increase, Comparison: GreaterThanThreshold},
			{Name: "b", Metric: "m", Statistic: Value, Comparison: GreaterThanOrEqualToThreshold},
			{Name: "c", Metric: "m", Statistic: P50, Comparison: LessThanThreshold, Threshold: -1},
			{Name: "d", Metric: "m", Statistic: P90, Comparison: LessThanOrEqualToThreshold},
			{Name: "e", Metric: "m", Statistic: P99, Comparison: GreaterThanThreshold},
			{Name: "f", Metric: "m", Statistic: Mean, Comparison: GreaterThanThreshold},
		}, ""},
		{"most alarms", many(MaxAlarms), ""},
		{"too many alarms", many(MaxAlarms + 1), "alarms: 101 alarms; at most 100"},
		{"longest name", with(func(a *Alarm) { a.Name = strings.Repeat("é", MaxNameLength) }), ""},
		{"empty name", with(func(a *Alarm) { a.Name = "" }), "alarms[0].name: must not be empty"},
		{"blank name", with(func(a *Alarm) { a.Name = " \t " }), "alarms[0].name: must not be empty or only whitespace"},
		{"long name", with(func(a *Alarm) { a.Name = strings.Repeat("x", MaxNameLength+1) }), "alarms[0].name: must be at most 255 characters"},
		{"two-line name", with(func(a *Alarm) { a.Name = "a\nb" }), "alarms[0].name: must be one line"},
		{"repeated name", []Alarm{ok(), ok()}, `alarms[1].name: "high-errors" repeats alarms[0].name`},
		{"no metric", with(func(a *Alarm) { a.Metric = "" }), `alarms[0].metric: "" is not a Prometheus metric name`},
		{"bad metric", with(func(a *Alarm) { a.Metric = "capstan-requests" }), `alarms[0].metric: "capstan-requests" is not a Prometheus metric name`},
		{"endpoint label", with(func(a *Alarm) { a.Labels = map[string]string{"endpoint": "x"} }), "alarms[0].labels.endpoint: set by the deployment"},
		{"bad label name", with(func(a *Alarm) { a.Labels = map[string]string{"a-b": "x"} }), `alarms[0].labels: "a-b" is not a Prometheus label name`},
		{"reserved label name", with(func(a *Alarm) { a.Labels = map[string]string{"__name__": "x"} }), `alarms[0].labels: "__name__" is not a Prometheus label name`},
		{"empty label value", with(func(a *Alarm) { a.Labels = map[string]string{"status": ""} }), "alarms[0].labels.status: must not be empty"},
		{"long label value", with(func(a *Alarm) { a.Labels = map[string]string{"status": strings.Repeat("x", MaxLabelValueLen+1)} }), "alarms[0].labels.status: must be at most 128 bytes"},
		{"too many labels", with(func(a *Alarm) { a.Labels = manyLabels }), "alarms[0].labels: 11 labels; at most 10"},
		{"bad statistic", with(func(a *Alarm) { a.Statistic = "p95" }), `alarms[0].statistic: "p95" is not one of`},
		{"no comparison", with(func(a *Alarm) { a.Comparison = "" }), "alarms[0].comparison: is required"},
		{"bad comparison", with(func(a *Alarm) { a.Comparison = ">" }), `alarms[0].comparison: ">" is not one of`},
		{"NaN threshold", with(func(a *Alarm) { a.Threshold = math.NaN() }), "alarms[0].threshold: must be finite"},
		{"infinite threshold", with(func(a *Alarm) { a.Threshold = math.Inf(-1) }), "alarms[0].threshold: must be finite"},
		{"second alarm named", []Alarm{ok(), {Name: "b", Metric: "m", Comparison: GreaterThanThreshold, Threshold: math.Inf(1)}}, "alarms[1].threshold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.alarms)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v; want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewEvaluatorValidates(t *testing.T) {
	_, err := NewEvaluator(newGateway(t, testBuckets).reg, []Alarm{{Name: "x", Metric: "m", Comparison: "Above"}})
	if err == nil || !strings.Contains(err.Error(), "alarms[0].comparison") {
		t.Fatalf("NewEvaluator = %v; want the validation error", err)
	}
}
