package awsjson

import (
	"encoding/json"
	"testing"
	"time"
)

func TestEpoch(t *testing.T) {
	want := time.Date(2026, 12, 3, 9, 0, 0, 500_000_000, time.UTC)
	tests := []struct {
		name, in string
		want     time.Time
		wantErr  bool
	}{
		{"number", "1796288400.5", want, false},
		{"string seconds", `"1796288400.5"`, want, false},
		{"RFC 3339", `"2026-12-03T09:00:00.5Z"`, want, false},
		{"garbage", `"next tuesday"`, time.Time{}, true},
		{"wrong type", `true`, time.Time{}, true},
		{"huge number", "1e300", time.Time{}, true},
		{"huge string", `"1e300"`, time.Time{}, true},
		{"NaN string", `"NaN"`, time.Time{}, true},
		{"Inf string", `"+Inf"`, time.Time{}, true},
		{"negative Inf string", `"-Infinity"`, time.Time{}, true},
		{"before year 1", "-62135596801", time.Time{}, true},
		{"after year 9999", "253402300800", time.Time{}, true},
		{"RFC 3339 year 0", `"0000-06-01T00:00:00Z"`, time.Time{}, true},
		{"year 1", "-62135596800", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"last millisecond of 9999", "253402300799.999", time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Epoch
			err := json.Unmarshal([]byte(tt.in), &e)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !e.Equal(tt.want) {
				t.Fatalf("= %v, want %v", e.Time, tt.want)
			}
		})
	}
	b, err := json.Marshal(EpochOf(want))
	if err != nil || string(b) != "1796288400.5" {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	if EpochOf(time.Time{}) != nil {
		t.Fatal("EpochOf(zero) is not nil")
	}
}
