package cloudwatch

import (
	"fmt"
	"math"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// The request and response types every protocol decodes into and encodes
// from. Field names are the wire member names; json tags carry omitempty
// for CBOR and JSON alike (the CBOR codec falls back to json tags).

// Dimension is a name/value pair of a metric.
type Dimension struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// DimensionFilter selects metrics of ListMetrics; a nil Value matches any.
type DimensionFilter struct {
	Name  string  `json:"Name"`
	Value *string `json:"Value,omitempty"`
}

// Metric names one series.
type Metric struct {
	Namespace  string      `json:"Namespace,omitempty"`
	MetricName string      `json:"MetricName,omitempty"`
	Dimensions []Dimension `json:"Dimensions"`
}

// GetMetricStatisticsInput is GetMetricStatistics' request.
type GetMetricStatisticsInput struct {
	Namespace          string      `json:"Namespace,omitempty"`
	MetricName         string      `json:"MetricName,omitempty"`
	Dimensions         []Dimension `json:"Dimensions,omitempty"`
	StartTime          *Timestamp  `json:"StartTime,omitempty"`
	EndTime            *Timestamp  `json:"EndTime,omitempty"`
	Period             *int64      `json:"Period,omitempty"`
	Statistics         []string    `json:"Statistics,omitempty"`
	ExtendedStatistics []string    `json:"ExtendedStatistics,omitempty"`
	Unit               string      `json:"Unit,omitempty"`
}

// Datapoint is one period of GetMetricStatistics.
type Datapoint struct {
	Timestamp          Timestamp         `json:"Timestamp"`
	SampleCount        *Double           `json:"SampleCount,omitempty"`
	Average            *Double           `json:"Average,omitempty"`
	Sum                *Double           `json:"Sum,omitempty"`
	Minimum            *Double           `json:"Minimum,omitempty"`
	Maximum            *Double           `json:"Maximum,omitempty"`
	Unit               string            `json:"Unit,omitempty"`
	ExtendedStatistics map[string]Double `json:"ExtendedStatistics,omitempty"`
}

// GetMetricStatisticsOutput is GetMetricStatistics' response.
type GetMetricStatisticsOutput struct {
	Label      string      `json:"Label"`
	Datapoints []Datapoint `json:"Datapoints"`
}

// MetricStat is a metric, period, statistic and unit of GetMetricData.
type MetricStat struct {
	Metric *Metric `json:"Metric,omitempty"`
	Period *int64  `json:"Period,omitempty"`
	Stat   string  `json:"Stat,omitempty"`
	Unit   string  `json:"Unit,omitempty"`
}

// MetricDataQuery is one query of GetMetricData.
type MetricDataQuery struct {
	Id         string      `json:"Id,omitempty"`
	MetricStat *MetricStat `json:"MetricStat,omitempty"`
	Expression string      `json:"Expression,omitempty"`
	Label      string      `json:"Label,omitempty"`
	ReturnData *bool       `json:"ReturnData,omitempty"`
	Period     *int64      `json:"Period,omitempty"`
	AccountId  string      `json:"AccountId,omitempty"`
}

// LabelOptions of GetMetricData.
type LabelOptions struct {
	Timezone string `json:"Timezone,omitempty"`
}

// GetMetricDataInput is GetMetricData's request.
type GetMetricDataInput struct {
	MetricDataQueries []MetricDataQuery `json:"MetricDataQueries,omitempty"`
	StartTime         *Timestamp        `json:"StartTime,omitempty"`
	EndTime           *Timestamp        `json:"EndTime,omitempty"`
	NextToken         string            `json:"NextToken,omitempty"`
	ScanBy            string            `json:"ScanBy,omitempty"`
	MaxDatapoints     *int64            `json:"MaxDatapoints,omitempty"`
	LabelOptions      *LabelOptions     `json:"LabelOptions,omitempty"`
}

// MessageData is an informational message of GetMetricData.
type MessageData struct {
	Code  string `json:"Code,omitempty"`
	Value string `json:"Value,omitempty"`
}

// MetricDataResult is one query's answer.
type MetricDataResult struct {
	Id         string        `json:"Id"`
	Label      string        `json:"Label"`
	Timestamps []Timestamp   `json:"Timestamps"`
	Values     []Double      `json:"Values"`
	StatusCode string        `json:"StatusCode"`
	Messages   []MessageData `json:"Messages"`
}

// GetMetricDataOutput is GetMetricData's response.
type GetMetricDataOutput struct {
	MetricDataResults []MetricDataResult `json:"MetricDataResults"`
	NextToken         string             `json:"NextToken,omitempty"`
	Messages          []MessageData      `json:"Messages"`
}

// ListMetricsInput is ListMetrics' request.
type ListMetricsInput struct {
	Namespace             string            `json:"Namespace,omitempty"`
	MetricName            string            `json:"MetricName,omitempty"`
	Dimensions            []DimensionFilter `json:"Dimensions,omitempty"`
	NextToken             string            `json:"NextToken,omitempty"`
	RecentlyActive        string            `json:"RecentlyActive,omitempty"`
	IncludeLinkedAccounts *bool             `json:"IncludeLinkedAccounts,omitempty"`
	OwningAccount         string            `json:"OwningAccount,omitempty"`
}

// ListMetricsOutput is ListMetrics' response.
type ListMetricsOutput struct {
	Metrics        []Metric `json:"Metrics"`
	NextToken      string   `json:"NextToken,omitempty"`
	OwningAccounts []string `json:"OwningAccounts,omitempty"`
}

// Timestamp is a wire timestamp: epoch seconds in JSON, CBOR tag 1 in CBOR,
// ISO 8601 in the query protocol.
type Timestamp struct{ time.Time }

// MarshalJSON writes epoch seconds.
func (t Timestamp) MarshalJSON() ([]byte, error) { return awsjson.Epoch{Time: t.Time}.MarshalJSON() }

// UnmarshalJSON reads epoch seconds (or, as the CLI may send, a string),
// refusing values outside years 1 to 9999.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var e awsjson.Epoch
	if err := e.UnmarshalJSON(b); err != nil {
		return err
	}
	t.Time = e.Time.UTC()
	return nil
}

// MarshalCBOR writes tag 1 around epoch seconds.
func (t Timestamp) MarshalCBOR() ([]byte, error) { return cborEnc.Marshal(t.Time) }

// UnmarshalCBOR reads tag 1 (or an untagged number), within years 1 to 9999.
func (t *Timestamp) UnmarshalCBOR(b []byte) error {
	var tt time.Time
	if err := cborDec.Unmarshal(b, &tt); err != nil {
		return err
	}
	return t.set(tt)
}

func (t *Timestamp) set(tt time.Time) error {
	if tt.Before(awsjson.MinEpoch) || tt.After(awsjson.MaxEpoch) {
		return fmt.Errorf("timestamp %s is out of range: it must be between years 1 and 9999", tt.Format(time.RFC3339))
	}
	t.Time = tt.UTC()
	return nil
}

// parseISO reads a query-protocol timestamp.
func (t *Timestamp) parseISO(s string) error {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if tt, err := time.Parse(layout, s); err == nil {
			return t.set(tt)
		}
	}
	return fmt.Errorf("timestamp %q is not ISO 8601", s)
}

func tsp(t time.Time) *Timestamp { return &Timestamp{t} }

// Double is a wire double: JSON writes it with a fraction (5.0, as AWS
// does), so JSON clients read a float, as CBOR and XML clients do.
type Double float64

// MarshalJSON writes d as a JSON number with a fraction or exponent.
func (d Double) MarshalJSON() ([]byte, error) {
	f := float64(d)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("double %v has no JSON form", f)
	}
	return []byte(formatFloat(f)), nil
}
