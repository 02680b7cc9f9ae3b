package openai

import (
	"strings"
	"testing"
)

func TestStandaloneRoute(t *testing.T) {
	tests := []struct {
		name    string
		o       StandaloneOptions
		wantErr string
		check   func(t *testing.T, o StandaloneOptions)
	}{
		{name: "backends with events", o: StandaloneOptions{Endpoint: "m", Strategy: "kvaware", Model: "qwen3-32b",
			Backends: []string{"r0=127.0.0.1:1,r1=127.0.0.1:2"}, KVEvents: []string{"r1=tcp://127.0.0.1:5557"}, KVReplay: []string{"r1=tcp://127.0.0.1:5558"},
			MaxConcurrency: 4, MaxQueue: 8},
			check: func(t *testing.T, o StandaloneOptions) {
				r, _ := o.Route()
				v := r.Variants[0]
				if r.Endpoint != "m" || v.RoutingStrategy != "kvaware" || v.Model != "qwen3-32b" || len(v.Backends) != 2 ||
					v.Backends[0].ID != "r0" || v.Backends[0].KVEventsEndpoint != "" || v.Backends[1].KVEventsEndpoint != "tcp://127.0.0.1:5557" ||
					v.Backends[1].KVEventsReplay != "tcp://127.0.0.1:5558" || r.MaxConcurrency != 4 || r.MaxQueue != 8 {
					t.Fatalf("route %+v", r)
				}
			}},
		{name: "no backends", o: StandaloneOptions{Endpoint: "m"}, wantErr: "at least one backend"},
		{name: "malformed backend", o: StandaloneOptions{Endpoint: "m", Backends: []string{"r0"}}, wantErr: "want id=address"},
		{name: "duplicate id", o: StandaloneOptions{Endpoint: "m", Backends: []string{"r0=a:1", "r0=b:2"}}, wantErr: "given twice"},
		{name: "events for unknown backend", o: StandaloneOptions{Endpoint: "m", Backends: []string{"r0=a:1"}, KVEvents: []string{"r9=tcp://x:1"}}, wantErr: "no backend"},
		{name: "no endpoint", o: StandaloneOptions{Backends: []string{"r0=a:1"}}, wantErr: "--endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.o.Route()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, tt.o)
		})
	}
}
