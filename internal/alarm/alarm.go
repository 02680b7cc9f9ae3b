package alarm

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Statistic says what number an alarm compares with its threshold.
type Statistic string

const (
	// Increase is a counter's growth since the alarm was armed, summed over
	// the matching series; the default for counters.
	Increase Statistic = "increase"
	// Value is a gauge's current value, summed over the matching series;
	// the default for gauges.
	Value Statistic = "value"
	// P50, P90 and P99 are quantiles of a histogram's observations since
	// the alarm was armed, interpolated linearly within a bucket.
	P50 Statistic = "p50"
	P90 Statistic = "p90"
	P99 Statistic = "p99"
	// Mean is the mean of a histogram's observations since the alarm was armed.
	Mean Statistic = "mean"
)

// Comparison is how the statistic is compared with the threshold; the
// names are CloudWatch's.
type Comparison string

const (
	GreaterThanThreshold          Comparison = "GreaterThanThreshold"
	GreaterThanOrEqualToThreshold Comparison = "GreaterThanOrEqualToThreshold"
	LessThanThreshold             Comparison = "LessThanThreshold"
	LessThanOrEqualToThreshold    Comparison = "LessThanOrEqualToThreshold"
)

// Limits of a configuration. MaxNameLength is the longest alarm name a
// deployment may reference; the others keep one Check cheap.
const (
	MaxAlarms        = 100
	MaxLabels        = 10
	MaxNameLength    = 255
	MaxLabelValueLen = 128
)

// EndpointLabel is the label Arm restricts every alarm's series to; an
// alarm cannot set it itself.
const EndpointLabel = "endpoint"

// Alarm is one entry of capstan.yaml's alarms list.
type Alarm struct {
	// Name is what a deployment's rollback configuration references.
	Name string `json:"name"`
	// Metric is a Prometheus metric family capstan exposes, such as
	// capstan_gateway_requests_total or
	// capstan_gateway_request_duration_seconds (a histogram's family name,
	// not its _bucket series).
	Metric string `json:"metric"`
	// Labels select series by exact value, besides the endpoint Arm names.
	// A value like "5xx" also matches any three-digit value starting with
	// that digit, so one alarm covers a class of HTTP status codes.
	Labels map[string]string `json:"labels,omitempty"`
	// Statistic defaults to Increase for a counter and Value for a gauge;
	// a histogram needs one of P50, P90, P99 or Mean.
	Statistic Statistic `json:"statistic,omitempty"`
	// Comparison is required.
	Comparison Comparison `json:"comparison"`
	// Threshold is what the statistic is compared with.
	Threshold float64 `json:"threshold"`
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// quantiles maps each quantile statistic to its quantile.
var quantiles = map[Statistic]float64{P50: 0.5, P90: 0.9, P99: 0.99}

// Validate checks a configured alarm list, naming the offending field as
// capstan.yaml spells it (alarms[2].threshold).
func Validate(alarms []Alarm) error {
	var errs []error
	if len(alarms) > MaxAlarms {
		errs = append(errs, fmt.Errorf("alarms: %d alarms; at most %d", len(alarms), MaxAlarms))
	}
	seen := map[string]int{}
	for i, a := range alarms {
		p := fmt.Sprintf("alarms[%d]", i)
		if err := validName(a.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s.name: %w", p, err))
		} else if j, dup := seen[a.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: %q repeats alarms[%d].name", p, a.Name, j))
		} else {
			seen[a.Name] = i
		}
		if !metricName.MatchString(a.Metric) {
			errs = append(errs, fmt.Errorf("%s.metric: %q is not a Prometheus metric name", p, a.Metric))
		}
		errs = append(errs, validLabels(p, a.Labels)...)
		if _, q := quantiles[a.Statistic]; !q {
			switch a.Statistic {
			case "", Increase, Value, Mean:
			default:
				errs = append(errs, fmt.Errorf("%s.statistic: %q is not one of increase, value, p50, p90, p99, mean", p, a.Statistic))
			}
		}
		switch a.Comparison {
		case GreaterThanThreshold, GreaterThanOrEqualToThreshold, LessThanThreshold, LessThanOrEqualToThreshold:
		case "":
			errs = append(errs, fmt.Errorf("%s.comparison: is required", p))
		default:
			errs = append(errs, fmt.Errorf("%s.comparison: %q is not one of GreaterThanThreshold, GreaterThanOrEqualToThreshold, LessThanThreshold, LessThanOrEqualToThreshold", p, a.Comparison))
		}
		if math.IsNaN(a.Threshold) || math.IsInf(a.Threshold, 0) {
			errs = append(errs, fmt.Errorf("%s.threshold: must be finite", p))
		}
	}
	return errors.Join(errs...)
}

// validName follows the names a rollback configuration can carry: 1 to 255
// characters on one line, not only whitespace.
func validName(n string) error {
	switch {
	case strings.TrimSpace(n) == "":
		return errors.New("must not be empty or only whitespace")
	case utf8.RuneCountInString(n) > MaxNameLength:
		return fmt.Errorf("must be at most %d characters", MaxNameLength)
	case strings.ContainsAny(n, "\r\n"):
		return errors.New("must be one line")
	}
	return nil
}

func validLabels(p string, labels map[string]string) []error {
	var errs []error
	if len(labels) > MaxLabels {
		errs = append(errs, fmt.Errorf("%s.labels: %d labels; at most %d", p, len(labels), MaxLabels))
	}
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		switch {
		case k == EndpointLabel:
			errs = append(errs, fmt.Errorf("%s.labels.%s: set by the deployment the alarm watches; remove it", p, k))
		case !labelName.MatchString(k) || strings.HasPrefix(k, "__"):
			errs = append(errs, fmt.Errorf("%s.labels: %q is not a Prometheus label name", p, k))
		case v == "":
			errs = append(errs, fmt.Errorf("%s.labels.%s: must not be empty", p, k))
		case len(v) > MaxLabelValueLen:
			errs = append(errs, fmt.Errorf("%s.labels.%s: must be at most %d bytes", p, k, MaxLabelValueLen))
		}
	}
	return errs
}
