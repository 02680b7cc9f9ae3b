package awsjson

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Epoch is an AWS JSON 1.1 timestamp: epoch seconds as a JSON number.
type Epoch struct{ time.Time }

// EpochOf is t as an optional wire timestamp (nil when t is zero).
func EpochOf(t time.Time) *Epoch {
	if t.IsZero() {
		return nil
	}
	return &Epoch{t}
}

// MarshalJSON writes seconds with millisecond precision.
func (e Epoch) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(e.UnixMilli())/1000, 'f', -1, 64)), nil
}

// The range of a timestamp a request may carry: RFC 3339's years 0001 to
// 9999. Anything outside (1e300, "NaN", "Inf") is refused while decoding,
// so the APIs answer SerializationException, as AWS does for a timestamp it
// cannot read, and no caller converts an out-of-range float to int64 (which
// Go leaves implementation-defined).
var (
	MinEpoch = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxEpoch = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
)

// UnmarshalJSON accepts epoch seconds as a number, or as a string holding
// either epoch seconds or an RFC 3339 time (the CLI sends what users type),
// within [MinEpoch, MaxEpoch].
func (e *Epoch) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			if t.Before(MinEpoch) || t.After(MaxEpoch) {
				return fmt.Errorf("timestamp %q is out of range: it must be between %s and %s", s, MinEpoch.Format(time.RFC3339), MaxEpoch.Format(time.RFC3339Nano))
			}
			e.Time = t
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("could not parse timestamp %q: use epoch seconds or RFC 3339", s)
		}
		return e.setSeconds(f)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	return e.setSeconds(f)
}

var (
	minSeconds = float64(MinEpoch.Unix())
	maxSeconds = float64(MaxEpoch.UnixMilli()) / 1000
)

// setSeconds sets e to f epoch seconds, refusing NaN, infinities and values
// outside [MinEpoch, MaxEpoch].
func (e *Epoch) setSeconds(f float64) error {
	if !(f >= minSeconds && f <= maxSeconds) { // false for NaN too
		return fmt.Errorf("timestamp %v is out of range: epoch seconds must be between %.0f (%s) and %.3f (%s)",
			f, minSeconds, MinEpoch.Format(time.RFC3339), maxSeconds, MaxEpoch.Format(time.RFC3339Nano))
	}
	e.Time = time.UnixMilli(int64(math.Round(f * 1000))).UTC()
	return nil
}
