package sagemaker

import (
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

func newAPI(t *testing.T) (*httptest.Server, *clock.Fake) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC))
	cat := catalog.Default()
	svc := endpoint.NewService(st, fleet.New(fleet.Default(cat)), cat, clk, nil)
	srv := httptest.NewServer(NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat}))
	t.Cleanup(srv.Close)
	return srv, clk
}

func call(t *testing.T, url, op, body string) (int, http.Header, []byte) {
	t.Helper()
	return awsjsontest.Call(t, url, "SageMaker."+op, body)
}

// TestWireGolden pins the JSON of each operation's response (and of errors)
// to files under testdata/; run with -update to rewrite them after a
// deliberate change.
func TestWireGolden(t *testing.T) {
	srv, clk := newAPI(t)
	steps := []struct {
		name, op, body string
		status         int
	}{
		{"create_model", "CreateModel", `{"ModelName":"My-Model","PrimaryContainer":{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}},"ExecutionRoleArn":"arn:aws:iam::123456789012:role/r"}`, 200},
		{"describe_model", "DescribeModel", `{"ModelName":"My-Model"}`, 200},
		{"create_endpoint_config", "CreateEndpointConfig", `{"EndpointConfigName":"cfg","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"My-Model","InstanceType":"ml.g5.xlarge","InitialInstanceCount":2,"RoutingConfig":{"RoutingStrategy":"RANDOM"}}]}`, 200},
		{"describe_endpoint_config", "DescribeEndpointConfig", `{"EndpointConfigName":"cfg"}`, 200},
		{"create_endpoint", "CreateEndpoint", `{"EndpointName":"Ep-1","EndpointConfigName":"cfg"}`, 200},
		{"describe_endpoint_creating", "DescribeEndpoint", `{"EndpointName":"Ep-1"}`, 200},
		{"list_endpoints", "ListEndpoints", `{"MaxResults":5,"SortBy":"Name","SortOrder":"Ascending"}`, 200},
		{"list_models", "ListModels", `{}`, 200},
		{"list_endpoint_configs", "ListEndpointConfigs", `{"SortBy":"Name"}`, 200},
		{"error_not_found", "DescribeEndpoint", `{"EndpointName":"Missing"}`, 400},
		{"error_in_progress", "UpdateEndpoint", `{"EndpointName":"Ep-1","EndpointConfigName":"cfg"}`, 400},
		{"error_validation", "CreateEndpointConfig", `{"EndpointConfigName":"x_y","ProductionVariants":[{"VariantName":"v","ModelName":"My-Model","InstanceType":"ml.nope","InitialInstanceCount":0,"InitialVariantWeight":-1}]}`, 400},
		{"error_limit", "CreateEndpointConfig", `{"EndpointConfigName":"huge","ProductionVariants":[{"VariantName":"v","ModelName":"My-Model","InstanceType":"ml.g5.xlarge","InitialInstanceCount":9}]}`, 200},
		{"error_limit_create", "CreateEndpoint", `{"EndpointName":"huge","EndpointConfigName":"huge"}`, 400},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.Step(time.Second)
			goldenCall(t, srv.URL, s.op, s.body, s.status, s.name)
		})
	}
}

// goldenCall sends body as op, expects status (an error's __type also in
// X-Amzn-ErrorType) and compares the body with testdata/<name>.json.
func goldenCall(t *testing.T, url, op, body string, status int, name string) {
	t.Helper()
	st, hdr, raw := call(t, url, op, body)
	if st != status {
		t.Fatalf("status %d, want %d: %s", st, status, raw)
	}
	if st != 200 {
		var e map[string]string
		_ = json.Unmarshal(raw, &e)
		if hdr.Get("X-Amzn-ErrorType") != e["__type"] {
			t.Fatalf("header %q vs body %q", hdr.Get("X-Amzn-ErrorType"), e["__type"])
		}
	}
	awsjsontest.Golden(t, name, raw, *update)
}

func TestPagination(t *testing.T) {
	srv, clk := newAPI(t)
	call(t, srv.URL, "CreateModel", `{"ModelName":"m","PrimaryContainer":{"Environment":{"SM_MODEL_ID":"llama-3.1-8b"}}}`)
	call(t, srv.URL, "CreateEndpointConfig", `{"EndpointConfigName":"c","ProductionVariants":[{"VariantName":"v","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":1}]}`)
	for _, n := range []string{"e1", "e2", "e3", "e4", "e5"} {
		clk.Step(time.Second)
		if st, _, raw := call(t, srv.URL, "CreateEndpoint", `{"EndpointName":"`+n+`","EndpointConfigName":"c"}`); st != 200 {
			t.Fatalf("%s: %s", n, raw)
		}
	}
	tests := []struct {
		name string
		req  string
		want [][]string // pages
	}{
		{"default order is newest first", `{"MaxResults":2}`, [][]string{{"e5", "e4"}, {"e3", "e2"}, {"e1"}}},
		{"name ascending", `{"MaxResults":3,"SortBy":"Name","SortOrder":"Ascending"}`, [][]string{{"e1", "e2", "e3"}, {"e4", "e5"}}},
		{"creation time filter", `{"CreationTimeAfter":` + jsonEpoch(clk.Now().Add(-2500*time.Millisecond)) + `,"SortOrder":"Ascending"}`, [][]string{{"e3", "e4", "e5"}}},
		{"name contains", `{"NameContains":"E4"}`, [][]string{{"e4"}}},
		{"status equals", `{"StatusEquals":"InService"}`, [][]string{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkPages(t, srv.URL, "ListEndpoints", tc.req, "Endpoints", "EndpointName", tc.want)
		})
	}
	if st, _, raw := call(t, srv.URL, "ListEndpoints", `{"NextToken":"garbage"}`); st != 400 || !strings.Contains(string(raw), "ValidationException") {
		t.Fatalf("bad token: %d %s", st, raw)
	}
}

// checkPages lists op from req, following NextToken, and checks each page's
// names (the nameKey of each item under member) against want, and that only
// the last page has no NextToken.
func checkPages(t *testing.T, url, op, req, member, nameKey string, want [][]string) {
	t.Helper()
	var in map[string]any
	_ = json.Unmarshal([]byte(req), &in)
	for i, page := range want {
		b, _ := json.Marshal(in)
		st, _, raw := call(t, url, op, string(b))
		if st != 200 {
			t.Fatalf("page %d: %s", i, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		var got []string
		items, _ := out[member].([]any)
		for _, item := range items {
			name, _ := item.(map[string]any)[nameKey].(string)
			got = append(got, name)
		}
		if strings.Join(got, ",") != strings.Join(page, ",") {
			t.Fatalf("page %d = %v, want %v", i, got, page)
		}
		next, _ := out["NextToken"].(string)
		if (next != "") != (i < len(want)-1) {
			t.Fatalf("page %d NextToken %q", i, next)
		}
		in["NextToken"] = next
	}
}

func jsonEpoch(t time.Time) string {
	b, _ := Epoch{Time: t}.MarshalJSON()
	return string(b)
}

func TestResolveModelRule(t *testing.T) {
	cat := catalog.Default()
	tests := []struct {
		name    string
		c       *endpoint.Container
		want    string
		wantErr string
	}{
		{"HF_MODEL_ID", &endpoint.Container{Environment: map[string]string{"HF_MODEL_ID": "Qwen/Qwen2.5-7B-Instruct"}}, "qwen2.5-7b", ""},
		{"SM_MODEL_ID catalog id", &endpoint.Container{Environment: map[string]string{"SM_MODEL_ID": "mistral-7b"}}, "mistral-7b", ""},
		{"HF wins over SM", &endpoint.Container{Environment: map[string]string{"HF_MODEL_ID": "llama-3.1-8b", "SM_MODEL_ID": "mistral-7b"}}, "llama-3.1-8b", ""},
		{"ModelDataUrl", &endpoint.Container{ModelDataUrl: "s3://bucket/models/llama-3.1-70b.tar.gz"}, "llama-3.1-70b", ""},
		{"ModelDataUrl hub path", &endpoint.Container{ModelDataUrl: "s3://bucket/meta-llama/Llama-3.1-8B-Instruct/"}, "llama-3.1-8b", ""},
		{"unknown HF id", &endpoint.Container{Environment: map[string]string{"HF_MODEL_ID": "acme/x"}}, "", "PrimaryContainer.Environment.HF_MODEL_ID"},
		{"nothing named", &endpoint.Container{Image: "x"}, "", "names no model"},
		{"no container", nil, "", "has no container"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := endpoint.ResolveModel(cat, endpoint.Model{Name: "m", PrimaryContainer: tc.c})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}
