//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The bookkeeping the chaos verdict rests on: what an endpoint may look like
// after acknowledged, refused and uncertain writes.
func TestPossibleEndpointStates(t *testing.T) {
	a1 := epState{config: "a", count: 1}
	a3 := epState{config: "a", count: 3}
	b2 := epState{config: "b", count: 2}
	gone := epState{absent: true}
	create := func(epState) epState { return a1 }
	update := func(s epState) epState {
		if s.absent {
			return s
		}
		return b2
	}
	scale := func(s epState) epState {
		if s.absent {
			return s
		}
		return epState{config: s.config, count: 3}
	}
	del := func(epState) epState { return gone }
	type step struct {
		o outcome
		f func(epState) epState
	}
	tests := []struct {
		name  string
		steps []step
		want  []epState
	}{
		{"acknowledged create", []step{{acked, create}}, []epState{a1}},
		{"uncertain create", []step{{uncertain, create}}, []epState{gone, a1}},
		{"refused create", []step{{refused, create}}, []epState{gone}},
		{"create then acknowledged update", []step{{acked, create}, {acked, update}}, []epState{b2}},
		{"create then uncertain update", []step{{acked, create}, {uncertain, update}}, []epState{a1, b2}},
		{"create, refused update, acknowledged scale", []step{{acked, create}, {refused, update}, {acked, scale}}, []epState{a3}},
		{"uncertain update then acknowledged scale", []step{{acked, create}, {uncertain, update}, {acked, scale}}, []epState{a3, {config: "b", count: 3}}},
		{"acknowledged delete", []step{{acked, create}, {acked, scale}, {acked, del}}, []epState{gone}},
		{"uncertain delete", []step{{acked, create}, {uncertain, del}}, []epState{gone, a1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWrites()
			for _, s := range tc.steps {
				w.endpoint("ep", s.o, s.f)
			}
			got := keys(w.endpoints["ep"])
			order := func(xs []epState) {
				sort.Slice(xs, func(i, j int) bool { return fmt.Sprint(xs[i]) < fmt.Sprint(xs[j]) })
			}
			order(got)
			order(tc.want)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("possible states %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPossibleManifestReplicas(t *testing.T) {
	tests := []struct {
		name  string
		steps []outcome
		want  []int32 // after applies of replicas 1, 2, 3, … in turn
	}{
		{"acknowledged", []outcome{acked, acked}, []int32{2}},
		{"uncertain after acknowledged", []outcome{acked, uncertain}, []int32{1, 2}},
		{"refused after acknowledged", []outcome{acked, refused}, []int32{1}},
		{"uncertain create", []outcome{uncertain}, []int32{absentReplicas, 1}},
		{"acknowledged after uncertain", []outcome{uncertain, uncertain, acked}, []int32{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWrites()
			for i, o := range tc.steps {
				w.manifest("m", o, int32(i+1))
			}
			got := keys(w.manifests["m"])
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("possible replicas %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	sdkErr := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("api error")}}
	}
	tests := []struct {
		name string
		err  error
		want outcome
	}{
		{"nil", nil, acked},
		{"SDK 400", sdkErr(400), refused},
		{"SDK 500", sdkErr(500), uncertain},
		{"HTTP 409", &httpStatusError{code: 409}, refused},
		{"HTTP 503", &httpStatusError{code: 503}, uncertain},
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), uncertain},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestOutsideWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	j := newJournal()
	j.windows = []window{{what: "kill", start: at(10), end: at(12)}}
	j.failures = []failure{
		{what: "before", start: at(1), end: at(2)},
		{what: "in flight at the kill", start: at(9), end: at(10.5)},
		{what: "inside", start: at(11), end: at(11.1)},
		{what: "after", start: at(12.5), end: at(13)},
	}
	var got []string
	for _, f := range j.outsideWindows() {
		got = append(got, f.what)
	}
	if want := []string{"before", "after"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outside %v, want %v", got, want)
	}
}
