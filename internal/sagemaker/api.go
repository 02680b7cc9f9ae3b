package sagemaker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/sagemaker/sigv4"
)

const contentType = "application/x-amz-json-1.1"

// DefaultMaxBodyBytes bounds a control API request body.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the control API.
type Options struct {
	AccountID    string
	Region       string
	MaxBodyBytes int64
	Catalog      *catalog.Catalog
	Logger       *slog.Logger
	// Capacity serves the training-plan operations and the reservation
	// counts in DescribeEndpoint; nil disables them.
	Capacity *capacity.Calendar
}

// API is the control API handler.
type API struct {
	svc  *endpoint.Service
	opts Options
	log  *slog.Logger
	ops  map[string]func(ctx context.Context, body []byte) (any, error)
}

var _ http.Handler = (*API)(nil)

// NewAPI returns the control API over svc.
func NewAPI(svc *endpoint.Service, o Options) *API {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &API{svc: svc, opts: o, log: o.Logger}
	a.ops = map[string]func(context.Context, []byte) (any, error){
		"CreateModel":                        a.createModel,
		"DescribeModel":                      a.describeModel,
		"DeleteModel":                        a.deleteModel,
		"ListModels":                         a.listModels,
		"CreateEndpointConfig":               a.createEndpointConfig,
		"DescribeEndpointConfig":             a.describeEndpointConfig,
		"DeleteEndpointConfig":               a.deleteEndpointConfig,
		"ListEndpointConfigs":                a.listEndpointConfigs,
		"CreateEndpoint":                     a.createEndpoint,
		"DescribeEndpoint":                   a.describeEndpoint,
		"UpdateEndpoint":                     a.updateEndpoint,
		"UpdateEndpointWeightsAndCapacities": a.updateWeights,
		"DeleteEndpoint":                     a.deleteEndpoint,
		"ListEndpoints":                      a.listEndpoints,
		"SearchTrainingPlanOfferings":        a.searchTrainingPlanOfferings,
		"CreateTrainingPlan":                 a.createTrainingPlan,
		"DescribeTrainingPlan":               a.describeTrainingPlan,
		"ListTrainingPlans":                  a.listTrainingPlans,
	}
	return a
}

// ServeHTTP dispatches on X-Amz-Target.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", requestID())
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "SageMaker.")
	if r.Method != http.MethodPost {
		a.writeError(w, r, op, newWireError(http.StatusMethodNotAllowed, CodeUnknownOperation, "The control API accepts only POST /."))
		return
	}
	fn := a.ops[op]
	if !ok || fn == nil {
		a.writeError(w, r, op, newWireError(http.StatusBadRequest, CodeUnknownOperation, "Operation %q is not supported.", target))
		return
	}
	body, err := sigv4.ReadBody(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		a.writeError(w, r, op, err)
		return
	}
	out, err := fn(r.Context(), body)
	if err != nil {
		a.writeError(w, r, op, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	if out == nil {
		out = struct{}{}
	}
	_ = json.NewEncoder(w).Encode(out)
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// decode parses a JSON body strictly as to types; an empty body is {}.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return newWireError(http.StatusBadRequest, CodeSerialization, "Could not parse the request body: %v", err)
	}
	return nil
}

// arn builds a resource ARN; SageMaker lower-cases the name.
func (a *API) arn(resource, name string) string {
	kind := map[string]string{endpoint.ResModel: "model", endpoint.ResConfig: "endpoint-config", endpoint.ResEndpoint: "endpoint"}[resource]
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:%s/%s", a.opts.Region, a.opts.AccountID, kind, strings.ToLower(name))
}

// Epoch is the AWS JSON timestamp, shared with the other AWS API.
type Epoch = awsjson.Epoch
