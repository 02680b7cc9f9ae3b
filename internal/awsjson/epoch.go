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

// UnmarshalJSON accepts epoch seconds as a number, or as a string holding
// either epoch seconds or an RFC 3339 time (the CLI sends what users type).
func (e *Epoch) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			e.Time = t
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("could not parse timestamp %q: use epoch seconds or RFC 3339", s)
		}
		e.Time = fromSeconds(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	e.Time = fromSeconds(f)
	return nil
}

func fromSeconds(f float64) time.Time { return time.UnixMilli(int64(math.Round(f * 1000))).UTC() }
