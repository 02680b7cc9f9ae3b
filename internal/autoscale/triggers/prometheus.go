package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// maxPromResponse bounds a query response; a single-series answer is tiny,
// so anything near this is a query that returns far too much.
const maxPromResponse = 4 << 20

// prometheusTrigger runs an instant PromQL query with the semantics of
// KEDA's prometheus scaler (pkg/scalers/prometheus_scaler.go).
type prometheusTrigger struct {
	name       string
	target     autoscale.Target
	server     string
	query      string
	namespace  string
	headers    http.Header
	client     *http.Client
	ignoreNull bool
	cache      *valueCache
}

var _ autoscale.Trigger = (*prometheusTrigger)(nil)

func newPrometheusTrigger(t *manifest.PrometheusTrigger, polling time.Duration, env Env, field string) (*prometheusTrigger, error) {
	u, err := url.Parse(t.ServerAddress)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("triggers: %s.serverAddress: %q is not an http(s) URL", field, t.ServerAddress)
	}
	if t.Query == "" {
		return nil, fmt.Errorf("triggers: %s.query: required", field)
	}
	h, err := ParseCustomHeaders(t.CustomHeaders)
	if err != nil {
		return nil, fmt.Errorf("triggers: %s.customHeaders: %w", field, err)
	}
	client := env.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: defaultHTTPTimeout}
	}
	return &prometheusTrigger{
		name:       t.Name,
		target:     target(t.MetricType, t.TargetValue, t.ActivationTargetValue),
		server:     strings.TrimRight(t.ServerAddress, "/"),
		query:      t.Query,
		namespace:  t.Namespace,
		headers:    h,
		client:     client,
		ignoreNull: true, // KEDA's default; the manifest has no field for it
		cache:      newCache(t.UseCachedMetrics, polling, env.Clock),
	}, nil
}

// ParseCustomHeaders parses KEDA's customHeaders form "k=v,k2=v2" (spaces
// around names and values trimmed). An empty string is no headers.
func ParseCustomHeaders(s string) (http.Header, error) {
	h := http.Header{}
	if strings.TrimSpace(s) == "" {
		return h, nil
	}
	for i, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || !validHeaderName(k) {
			return nil, fmt.Errorf("entry %d %q is not name=value with a valid header name", i, pair)
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("entry %d: value has a line break", i)
		}
		h.Add(k, v)
	}
	return h, nil
}

// validHeaderName: an RFC 7230 token.
func validHeaderName(s string) bool {
	for _, r := range s {
		if r > 126 || r <= 32 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return s != ""
}

func (p *prometheusTrigger) Name() string             { return p.name }
func (p *prometheusTrigger) Target() autoscale.Target { return p.target }

// Value runs the query now.
func (p *prometheusTrigger) Value(ctx context.Context) (float64, error) {
	return p.cache.get(ctx, p.query1)
}

// promResponse is the /api/v1/query envelope.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

func (p *prometheusTrigger) query1(ctx context.Context) (float64, error) {
	q := url.Values{"query": {p.query}}
	// KEDA also sends time=now from its own clock; leaving it out lets the
	// server evaluate at its now, which is the same without client skew.
	if p.namespace != "" {
		// KEDA adds namespace as a query parameter, for namespaced
		// queriers such as Thanos/prom-label-proxy; Prometheus ignores it.
		q.Set("namespace", p.namespace)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.server+"/api/v1/query?"+q.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("prometheus: %w", err)
	}
	for k, vs := range p.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("prometheus %s: %w", p.server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPromResponse+1))
	if err != nil {
		return 0, fmt.Errorf("prometheus %s: reading response: %w", p.server, err)
	}
	if len(body) > maxPromResponse {
		return 0, fmt.Errorf("prometheus query %q: response larger than %d bytes", p.query, maxPromResponse)
	}
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("prometheus %s: HTTP %d, not a query response: %.200q", p.server, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus query %q: HTTP %d %s: %s", p.query, resp.StatusCode, r.ErrorType, r.Error)
	}
	var v float64
	switch r.Data.ResultType {
	case "scalar":
		var s model.Scalar
		if err := json.Unmarshal(r.Data.Result, &s); err != nil {
			return 0, fmt.Errorf("prometheus query %q: bad scalar: %w", p.query, err)
		}
		v = float64(s.Value)
	case "vector":
		var vec model.Vector
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return 0, fmt.Errorf("prometheus query %q: bad vector: %w", p.query, err)
		}
		switch len(vec) {
		case 0:
			if p.ignoreNull {
				return 0, nil
			}
			return 0, fmt.Errorf("prometheus query %q returned no series (target may be lost)", p.query)
		case 1:
			v = float64(vec[0].Value)
		default:
			return 0, fmt.Errorf("prometheus query %q returned %d series, want one (aggregate it, e.g. sum(...))", p.query, len(vec))
		}
	default:
		return 0, fmt.Errorf("prometheus query %q returned a %s, want a scalar or a single-series vector", p.query, r.Data.ResultType)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if p.ignoreNull {
			return 0, nil
		}
		return 0, fmt.Errorf("prometheus query %q returned %g", p.query, v)
	}
	return v, nil
}
