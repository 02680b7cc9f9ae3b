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
