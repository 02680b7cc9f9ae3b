package cloudwatch

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// Limits CloudWatch enforces (and capstan with it).
const (
	// MaxStatisticsDatapoints bounds GetMetricStatistics' periods.
	MaxStatisticsDatapoints = 1440
	// MaxDataDatapoints is GetMetricData's default and largest MaxDatapoints.
	MaxDataDatapoints = 100800
	// MaxQueries bounds GetMetricData's MetricDataQueries.
	MaxQueries = 500
	// ListPageSize is how many metrics one ListMetrics page holds.
	ListPageSize        = 500
	maxDimensions       = 30
	maxDimensionFilters = 10
	maxStatistics       = 5
	maxExtended         = 10
	maxPeriod           = math.MaxInt32
	// recentlyActive is ListMetrics' RecentlyActive window (PT3H).
	recentlyActive = 3 * time.Hour
)

var basicStats = []string{"SampleCount", "Average", "Sum", "Minimum", "Maximum"}

const statEnum = "Member must satisfy enum value set: [Maximum, SampleCount, Sum, Minimum, Average]"

// Options configure a Service.
type Options struct {
	Clock     clock.Clock // nil: the real clock
	AccountID string      // the one account capstan serves
	Logger    *slog.Logger
}

// Service answers the operations from a store.
type Service struct {
	store *metricstore.Store
	clk   clock.Clock
	acct  string
	log   *slog.Logger
}

// NewService serves store.
func NewService(store *metricstore.Store, o Options) *Service {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{store: store, clk: o.Clock, acct: o.AccountID, log: o.Logger}
}

// GetMetricStatistics answers the statistics of one series per period.
func (s *Service) GetMetricStatistics(_ context.Context, in *GetMetricStatisticsInput) (*GetMetricStatisticsOutput, error) {
	if err := checkMetric(in.Namespace, in.MetricName, in.Dimensions, "", true); err != nil {
		return nil, err
	}
	start, end, err := checkRange(in.StartTime, in.EndTime)
	if err != nil {
		return nil, err
	}
	if in.Period == nil {
		return nil, missing("Period")
	}
	period, err := checkPeriod(*in.Period, "Period")
	if err != nil {
		return nil, err
	}
	if len(in.Statistics) == 0 && len(in.ExtendedStatistics) == 0 {
		return nil, invalidCombination("At least one of the parameters Statistics and ExtendedStatistics must be specified.")
	}
	if len(in.Statistics) > 0 && len(in.ExtendedStatistics) > 0 {
		return nil, invalidCombination("The parameters Statistics and ExtendedStatistics are mutually exclusive.")
	}
	if len(in.Statistics) > maxStatistics {
		return nil, constraint(fmt.Sprint(in.Statistics), "statistics", "Member must have length less than or equal to 5")
	}
	for i, st := range in.Statistics {
		if !slices.Contains(basicStats, st) {
			return nil, constraint(st, fmt.Sprintf("statistics.%d.member", i+1), statEnum)
		}
	}
	if len(in.ExtendedStatistics) > maxExtended {
		return nil, constraint(fmt.Sprint(in.ExtendedStatistics), "extendedStatistics", "Member must have length less than or equal to 10")
	}
	for i, st := range in.ExtendedStatistics {
		if _, ok := percentile(st); !ok {
			return nil, invalidValue("The parameter ExtendedStatistics.member.%d must be a percentile of the form pNN or pNN.NN (0 to 100), not '%s'.", i+1, st)
		}
	}
	if err := checkUnit(in.Unit, "unit"); err != nil {
		return nil, err
	}
	start = alignStart(start, period, s.clk.Now())
	if n := periods(start, end, period); n > MaxStatisticsDatapoints {
		return nil, invalidCombination("You have requested up to %s datapoints, which exceeds the limit of %s. You may reduce the datapoints requested by increasing Period, or decreasing the time range.",
			thousands(n), thousands(MaxStatisticsDatapoints))
	}
	out := &GetMetricStatisticsOutput{Label: in.MetricName, Datapoints: []Datapoint{}}
	unit := UnitOf(in.Namespace, in.MetricName)
	if in.Unit != "" && in.Unit != unit {
		return out, nil // CloudWatch: data recorded in another unit does not match
	}
	aggs, err := s.store.Statistics(metricstore.Query{Namespace: in.Namespace, Metric: in.MetricName,
		Dimensions: storeDims(in.Dimensions), Start: start, End: end, Period: period})
	if err != nil {
		return nil, fmt.Errorf("statistics: %w", err)
	}
	for _, a := range aggs {
		dp := Datapoint{Timestamp: Timestamp{a.Start.UTC()}, Unit: unit}
		for _, st := range in.Statistics {
			v := Double(statValue(a, st))
			switch st {
			case "SampleCount":
				dp.SampleCount = &v
			case "Average":
				dp.Average = &v
			case "Sum":
				dp.Sum = &v
			case "Minimum":
				dp.Minimum = &v
			case "Maximum":
				dp.Maximum = &v
			}
		}
		if len(in.ExtendedStatistics) > 0 {
			dp.ExtendedStatistics = map[string]Double{}
			for _, st := range in.ExtendedStatistics {
				dp.ExtendedStatistics[st] = Double(statValue(a, st))
			}
		}
		out.Datapoints = append(out.Datapoints, dp)
	}
	return out, nil
}

var idPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9_]*$`)

// GetMetricData answers MetricStat queries, paged by MaxDatapoints.
func (s *Service) GetMetricData(_ context.Context, in *GetMetricDataInput) (*GetMetricDataOutput, error) {
	if len(in.MetricDataQueries) == 0 {
		return nil, missing("MetricDataQueries")
	}
	if len(in.MetricDataQueries) > MaxQueries {
		return nil, invalidValue("The collection MetricDataQueries must not have more than %d members.", MaxQueries)
	}
	start, end, err := checkRange(in.StartTime, in.EndTime)
	if err != nil {
		return nil, err
	}
	scan := in.ScanBy
	switch scan {
	case "":
		scan = "TimestampDescending"
	case "TimestampDescending", "TimestampAscending":
	default:
		return nil, constraint(scan, "scanBy", "Member must satisfy enum value set: [TimestampDescending, TimestampAscending]")
	}
	maxPoints := int64(MaxDataDatapoints)
	if in.MaxDatapoints != nil {
		maxPoints = *in.MaxDatapoints
		if maxPoints < 1 || maxPoints > MaxDataDatapoints {
			return nil, invalidValue("The parameter MaxDatapoints must be between 1 and %d.", MaxDataDatapoints)
		}
	}
	out := &GetMetricDataOutput{MetricDataResults: []MetricDataResult{}, Messages: []MessageData{}}
	if in.LabelOptions != nil && in.LabelOptions.Timezone != "" {
		if !regexp.MustCompile(`^[+-]([01][0-9]|2[0-3])[0-5][0-9]$`).MatchString(in.LabelOptions.Timezone) {
			return nil, invalidValue("The parameter LabelOptions.Timezone must have the form +HHMM or -HHMM, not '%s'.", in.LabelOptions.Timezone)
		}
		out.Messages = append(out.Messages, MessageData{Code: "Unsupported", Value: "LabelOptions.Timezone has no effect: capstan does not expand dynamic labels."})
	}
	ids := map[string]bool{}
	returning := 0
	for i, q := range in.MetricDataQueries {
		p := fmt.Sprintf("MetricDataQueries.member.%d", i+1)
		if q.Id == "" {
			return nil, missing(p + ".Id")
		}
		if len(q.Id) > 255 || !idPattern.MatchString(q.Id) {
			return nil, invalidValue("The value %s for parameter %s.Id is not valid: it must start with a lower-case letter and hold only letters, digits and underscores.", q.Id, p)
		}
		if ids[q.Id] {
			return nil, invalidValue("The value %s for parameter %s.Id is used by another query: Ids must be unique.", q.Id, p)
		}
		ids[q.Id] = true
		if q.Expression != "" {
			return nil, invalidValue("The parameter %s.Expression is not supported: metric math expressions are not supported by capstan; use MetricStat.", p)
		}
		if q.MetricStat == nil {
			return nil, invalidCombination("Exactly one of the parameters %s.MetricStat and %s.Expression must be specified.", p, p)
		}
		if q.Period != nil {
			return nil, invalidCombination("The parameter %s.Period applies to Expression queries only; give the period in %s.MetricStat.Period.", p, p)
		}
		if q.AccountId != "" && q.AccountId != s.acct {
			return nil, invalidValue("The value %s for parameter %s.AccountId is not valid: capstan serves the one account %s.", q.AccountId, p, s.acct)
		}
		ms := q.MetricStat
		if ms.Metric == nil {
			return nil, missing(p + ".MetricStat.Metric")
		}
		if err := checkMetric(ms.Metric.Namespace, ms.Metric.MetricName, ms.Metric.Dimensions, p+".MetricStat.Metric.", false); err != nil {
			return nil, err
		}
		if ms.Period == nil {
			return nil, missing(p + ".MetricStat.Period")
		}
		if _, err := checkPeriod(*ms.Period, p+".MetricStat.Period"); err != nil {
			return nil, err
		}
		if ms.Stat == "" {
			return nil, missing(p + ".MetricStat.Stat")
		}
		if _, ok := percentile(ms.Stat); !ok && !slices.Contains(basicStats, ms.Stat) {
			return nil, invalidValue("The value %s for parameter %s.MetricStat.Stat is not supported: use SampleCount, Average, Sum, Minimum, Maximum or a percentile pNN(.NN).", ms.Stat, p)
		}
		if err := checkUnit(ms.Unit, p+".MetricStat.Unit"); err != nil {
			return nil, err
		}
		if strings.Contains(q.Label, "${") {
			out.Messages = append(out.Messages, MessageData{Code: "Unsupported", Value: fmt.Sprintf("The label of %s is returned as given: capstan does not expand dynamic labels.", q.Id)})
		}
		if q.ReturnData == nil || *q.ReturnData {
			returning++
		}
	}
	if returning == 0 {
		return nil, invalidValue("At least one of the MetricDataQueries must have ReturnData set to true.")
	}
	fp := fingerprint(in)
	from, after, err := decodeDataToken(in.NextToken, fp, len(in.MetricDataQueries))
	if err != nil {
		return nil, err
	}
	desc := scan == "TimestampDescending"
	left := maxPoints
	now := s.clk.Now()
	for i := from; i < len(in.MetricDataQueries); i++ {
		q := in.MetricDataQueries[i]
		if q.ReturnData != nil && !*q.ReturnData {
			continue
		}
		if left == 0 {
			out.NextToken = encodeDataToken(fp, i, nil)
			break
		}
		ts, vals, err := s.series(q.MetricStat, start, end, now, desc)
		if err != nil {
			return nil, err
		}
		k := 0
		if i == from && after != nil {
			// Resume past the last point the previous page returned.
			for k < len(ts) && (desc && !ts[k].Before(*after) || !desc && !ts[k].After(*after)) {
				k++
			}
		}
		label := q.Label
		if label == "" {
			label = q.MetricStat.Metric.MetricName
		}
		res := MetricDataResult{Id: q.Id, Label: label, Timestamps: []Timestamp{}, Values: []Double{}, StatusCode: "Complete", Messages: []MessageData{}}
		n := min(int64(len(ts)-k), left)
		for _, t := range ts[k : k+int(n)] {
			res.Timestamps = append(res.Timestamps, Timestamp{t})
		}
		res.Values = append(res.Values, vals[k:k+int(n)]...)
		left -= n
		out.MetricDataResults = append(out.MetricDataResults, res)
		if k+int(n) < len(ts) {
			res := &out.MetricDataResults[len(out.MetricDataResults)-1]
			res.StatusCode = "PartialData"
			last := ts[k+int(n)-1]
			out.NextToken = encodeDataToken(fp, i, &last)
			break
		}
	}
	return out, nil
}

// series is one MetricStat's points in scan order.
func (s *Service) series(ms *MetricStat, start, end, now time.Time, desc bool) ([]time.Time, []Double, error) {
	m := ms.Metric
	if ms.Unit != "" && ms.Unit != UnitOf(m.Namespace, m.MetricName) {
		return nil, nil, nil
	}
	period := time.Duration(*ms.Period) * time.Second
	aggs, err := s.store.Statistics(metricstore.Query{Namespace: m.Namespace, Metric: m.MetricName,
		Dimensions: storeDims(m.Dimensions), Start: alignStart(start, period, now), End: end, Period: period})
	if err != nil {
		return nil, nil, fmt.Errorf("statistics: %w", err)
	}
	if desc {
		slices.Reverse(aggs)
	}
	ts := make([]time.Time, len(aggs))
	vals := make([]Double, len(aggs))
	for i, a := range aggs {
		ts[i], vals[i] = a.Start.UTC(), Double(statValue(a, ms.Stat))
	}
	return ts, vals, nil
}

// ListMetrics lists the series matching the filters, a page at a time.
func (s *Service) ListMetrics(_ context.Context, in *ListMetricsInput) (*ListMetricsOutput, error) {
	if in.Namespace != "" {
		if err := checkName(in.Namespace, "namespace", 255); err != nil {
			return nil, err
		}
		if strings.HasPrefix(in.Namespace, ":") {
			return nil, constraint(in.Namespace, "namespace", "Member must satisfy regular expression pattern: [^:].*")
		}
	}
	if in.MetricName != "" {
		if err := checkName(in.MetricName, "metricName", 255); err != nil {
			return nil, err
		}
	}
	if len(in.Dimensions) > maxDimensionFilters {
		return nil, constraint(fmt.Sprintf("%d dimension filters", len(in.Dimensions)), "dimensions", "Member must have length less than or equal to 10")
	}
	filter := make([]metricstore.Dimension, 0, len(in.Dimensions))
	for i, f := range in.Dimensions {
		p := fmt.Sprintf("Dimensions.member.%d", i+1)
		if f.Name == "" {
			return nil, missing(p + ".Name")
		}
		if err := checkName(f.Name, strings.ToLower(p[:1])+p[1:]+".name", 255); err != nil {
			return nil, err
		}
		d := metricstore.Dimension{Name: f.Name}
		if f.Value != nil {
			if err := checkName(*f.Value, strings.ToLower(p[:1])+p[1:]+".value", 1024); err != nil {
				return nil, err
			}
			d.Value = *f.Value
		}
		filter = append(filter, d)
	}
	if in.RecentlyActive != "" && in.RecentlyActive != "PT3H" {
		return nil, constraint(in.RecentlyActive, "recentlyActive", "Member must satisfy enum value set: [PT3H]")
	}
	var after string
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		if err != nil || !strings.HasPrefix(string(b), "lm1\x00") {
			return nil, invalidValue("The parameter NextToken is not valid.")
		}
		after = string(b[4:])
	}
	out := &ListMetricsOutput{Metrics: []Metric{}}
	if in.OwningAccount != "" && in.OwningAccount != s.acct {
		return out, nil // capstan holds one account's metrics
	}
	now := s.clk.Now()
	var last metricstore.Series
	for _, se := range s.store.List(in.Namespace, in.MetricName, filter) {
		if after != "" && se.Key() <= after {
			continue
		}
		if in.RecentlyActive != "" && !s.active(se, now) {
			continue
		}
		if len(out.Metrics) == ListPageSize {
			out.NextToken = base64.RawURLEncoding.EncodeToString([]byte("lm1\x00" + last.Key()))
			break
		}
		last = se
		m := Metric{Namespace: se.Namespace, MetricName: se.Metric, Dimensions: []Dimension{}}
		for _, d := range se.Dimensions {
			m.Dimensions = append(m.Dimensions, Dimension{Name: d.Name, Value: d.Value})
		}
		out.Metrics = append(out.Metrics, m)
	}
	if in.IncludeLinkedAccounts != nil && *in.IncludeLinkedAccounts {
		for range out.Metrics {
			out.OwningAccounts = append(out.OwningAccounts, s.acct)
		}
	}
	return out, nil
}

// active says whether se has a sample in the last three hours.
func (s *Service) active(se metricstore.Series, now time.Time) bool {
	aggs, err := s.store.Statistics(metricstore.Query{Namespace: se.Namespace, Metric: se.Metric, Dimensions: se.Dimensions,
		Start: now.Add(-recentlyActive), End: now.Add(time.Second), Period: recentlyActive + time.Second})
	return err == nil && len(aggs) > 0
}

// checkMetric validates a namespace, metric name and dimension set; prefix
// is the parameter path ("" for GetMetricStatistics' top level).
func checkMetric(ns, name string, dims []Dimension, prefix string, top bool) error {
	if ns == "" {
		return missing(prefix + "Namespace")
	}
	lc := func(s string) string {
		if top {
			return strings.ToLower(s[:1]) + s[1:]
		}
		return prefix + s
	}
	if err := checkName(ns, lc("Namespace"), 255); err != nil {
		return err
	}
	if strings.HasPrefix(ns, ":") {
		return constraint(ns, lc("Namespace"), "Member must satisfy regular expression pattern: [^:].*")
	}
	if name == "" {
		return missing(prefix + "MetricName")
	}
	if err := checkName(name, lc("MetricName"), 255); err != nil {
		return err
	}
	if len(dims) > maxDimensions {
		return constraint(fmt.Sprintf("%d dimensions", len(dims)), lc("Dimensions"), "Member must have length less than or equal to 30")
	}
	seen := map[string]bool{}
	for i, d := range dims {
		p := fmt.Sprintf("%sDimensions.member.%d", prefix, i+1)
		if d.Name == "" {
			return missing(p + ".Name")
		}
		if d.Value == "" {
			return missing(p + ".Value")
		}
		if err := checkName(d.Name, p+".Name", 255); err != nil {
			return err
		}
		if err := checkName(d.Value, p+".Value", 1024); err != nil {
			return err
		}
		if seen[d.Name] {
			return invalidValue("The collection %sDimensions must not contain duplicate dimension name %s.", prefix, d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

func checkName(v, path string, max int) error {
	if len(v) > max {
		return constraint(truncate(v), path, fmt.Sprintf("Member must have length less than or equal to %d", max))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func checkUnit(u, path string) error {
	if u != "" && !slices.Contains(standardUnits, u) {
		return constraint(truncate(u), path, "Member must satisfy enum value set: ["+strings.Join(standardUnits, ", ")+"]")
	}
	return nil
}

// checkRange validates StartTime and EndTime.
func checkRange(start, end *Timestamp) (time.Time, time.Time, error) {
	if start == nil {
		return time.Time{}, time.Time{}, missing("StartTime")
	}
	if end == nil {
		return time.Time{}, time.Time{}, missing("EndTime")
	}
	if !start.Before(end.Time) {
		return time.Time{}, time.Time{}, invalidValue("The parameter StartTime must be less than the parameter EndTime.")
	}
	return start.Time, end.Time, nil
}

// checkPeriod: 1, 5, 10 or 30 seconds, or a multiple of 60.
func checkPeriod(p int64, path string) (time.Duration, error) {
	switch {
	case p < 1:
		return 0, constraint(strconv.FormatInt(p, 10), lowerFirst(path), "Member must have value greater than or equal to 1")
	case p > maxPeriod:
		return 0, invalidValue("The parameter %s must be at most %d.", path, maxPeriod)
	case p < 60 && p != 1 && p != 5 && p != 10 && p != 30:
		return 0, invalidValue("The parameter %s must be 1, 5, 10, 30, or a multiple of 60.", path)
	case p >= 60 && p%60 != 0:
		return 0, invalidValue("The parameter %s must be a multiple of 60.", path)
	}
	return time.Duration(p) * time.Second, nil
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

// alignStart rounds start down as CloudWatch does: to a multiple of a
// period under a minute; else by the start's age, to the minute (under 15
// days), to 5 minutes (under 63 days) or to the hour.
func alignStart(start time.Time, period time.Duration, now time.Time) time.Time {
	var to time.Duration
	switch age := now.Sub(start); {
	case period < time.Minute:
		to = period
	case age < 15*24*time.Hour:
		to = time.Minute
	case age < 63*24*time.Hour:
		to = 5 * time.Minute
	default:
		to = time.Hour
	}
	sec := start.Unix()
	step := int64(to / time.Second)
	r := sec - ((sec%step)+step)%step
	return time.Unix(r, 0).UTC()
}

// periods is how many periods [start, end) spans.
func periods(start, end time.Time, period time.Duration) int64 {
	span := end.Unix() - start.Unix()
	if end.Nanosecond() > 0 {
		span++
	}
	per := int64(period / time.Second)
	return (span + per - 1) / per
}

// percentile parses pNN or pNN.NN (0 ≤ NN ≤ 100).
func percentile(st string) (float64, bool) {
	rest, ok := strings.CutPrefix(st, "p")
	if !ok || rest == "" || len(rest) > 6 {
		return 0, false
	}
	whole, frac, dot := strings.Cut(rest, ".")
	if len(whole) < 1 || len(whole) > 3 || dot && (len(frac) < 1 || len(frac) > 2) {
		return 0, false
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	p, err := strconv.ParseFloat(rest, 64)
	if err != nil || p < 0 || p > 100 {
		return 0, false
	}
	return p, true
}

// statValue is one statistic of a.
func statValue(a metricstore.Aggregate, st string) float64 {
	switch st {
	case "SampleCount":
		return a.SampleCount
	case "Average":
		return a.Average()
	case "Sum":
		return a.Sum
	case "Minimum":
		return a.Min
	case "Maximum":
		return a.Max
	}
	p, _ := percentile(st)
	switch {
	case p <= 0:
		return a.Min
	case p >= 100:
		return a.Max
	}
	return a.Percentile(p)
}

func storeDims(ds []Dimension) []metricstore.Dimension {
	out := make([]metricstore.Dimension, len(ds))
	for i, d := range ds {
		out[i] = metricstore.Dimension{Name: d.Name, Value: d.Value}
	}
	return out
}

// thousands writes n with comma separators, as CloudWatch's messages do.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fingerprint identifies a GetMetricData request apart from its paging, so
// a NextToken is only honoured for the request that produced it.
func fingerprint(in *GetMetricDataInput) [8]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d|%d|%s|", in.StartTime.UnixNano(), in.EndTime.UnixNano(), in.ScanBy)
	for _, q := range in.MetricDataQueries {
		fmt.Fprintf(h, "%q|", q.Id)
		if ms := q.MetricStat; ms != nil && ms.Metric != nil && ms.Period != nil {
			fmt.Fprintf(h, "%q|%q|%d|%q|%q|", ms.Metric.Namespace, ms.Metric.MetricName, *ms.Period, ms.Stat, ms.Unit)
			for _, d := range ms.Metric.Dimensions {
				fmt.Fprintf(h, "%q=%q|", d.Name, d.Value)
			}
		}
	}
	var fp [8]byte
	copy(fp[:], h.Sum(nil))
	return fp
}

// A GetMetricData token: fingerprint, query index, and the last timestamp
// returned of that query (none: start the query from its first point).
func encodeDataToken(fp [8]byte, query int, after *time.Time) string {
	b := make([]byte, 0, 8+4+1+8)
	b = append(b, fp[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(query))
	if after == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(after.Unix()))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeDataToken(tok string, fp [8]byte, queries int) (int, *time.Time, error) {
	if tok == "" {
		return 0, nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != 13 && len(b) != 21 || [8]byte(b[:8]) != fp {
		return 0, nil, invalidNextToken()
	}
	q := int(binary.BigEndian.Uint32(b[8:12]))
	if q >= queries {
		return 0, nil, invalidNextToken()
	}
	switch {
	case b[12] == 0 && len(b) == 13:
		return q, nil, nil
	case b[12] == 1 && len(b) == 21:
		t := time.Unix(int64(binary.BigEndian.Uint64(b[13:])), 0).UTC()
		return q, &t, nil
	}
	return 0, nil, invalidNextToken()
}
