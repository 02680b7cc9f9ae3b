package sagemaker

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/tagging"
)

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
	// Clusters serves the HyperPod cluster operations (CreateCluster …
	// BatchDeleteClusterNodes); nil disables them.
	Clusters Clusters
	// Tags serves AddTags, ListTags and DeleteTags; nil disables them (the
	// create operations still keep the tags they are given).
	Tags *tagging.Service
}

// API is the control API handler.
type API struct {
	svc  *endpoint.Service
	opts Options
	h    *awsjson.Handler
	// batchAddTokens makes BatchAddClusterNodes idempotent by ClientToken.
	batchAddTokens idempotency
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
	a := &API{svc: svc, opts: o}
	ops := map[string]awsjson.Op{
		"CreateModel":                        a.createModel,
		"DescribeModel":                      a.describeModel,
		"DeleteModel":                        deleteOp(modelName, svc.DeleteModel),
		"ListModels":                         a.listModels,
		"CreateEndpointConfig":               a.createEndpointConfig,
		"DescribeEndpointConfig":             a.describeEndpointConfig,
		"DeleteEndpointConfig":               deleteOp(configName, svc.DeleteEndpointConfig),
		"ListEndpointConfigs":                a.listEndpointConfigs,
		"CreateEndpoint":                     a.createEndpoint,
		"DescribeEndpoint":                   a.describeEndpoint,
		"UpdateEndpoint":                     a.updateEndpoint,
		"UpdateEndpointWeightsAndCapacities": a.updateWeights,
		"DeleteEndpoint":                     deleteOp(endpointName, svc.DeleteEndpoint),
		"ListEndpoints":                      a.listEndpoints,
		"SearchTrainingPlanOfferings":        a.searchTrainingPlanOfferings,
		"CreateTrainingPlan":                 a.createTrainingPlan,
		"DescribeTrainingPlan":               a.describeTrainingPlan,
		"ListTrainingPlans":                  a.listTrainingPlans,
		"CreateCluster":                      a.createCluster,
		"DescribeCluster":                    a.describeCluster,
		"ListClusters":                       a.listClusters,
		"UpdateCluster":                      a.updateCluster,
		"DeleteCluster":                      a.deleteCluster,
		"ListClusterNodes":                   a.listClusterNodes,
		"DescribeClusterNode":                a.describeClusterNode,
		"BatchAddClusterNodes":               a.batchAddClusterNodes,
		"BatchDeleteClusterNodes":            a.batchDeleteClusterNodes,
		"AddTags":                            a.addTags,
		"ListTags":                           a.listTags,
		"DeleteTags":                         a.deleteTags,
	}
	a.h = &awsjson.Handler{Prefix: "SageMaker.", Name: "control API", Ops: ops, MaxBodyBytes: o.MaxBodyBytes,
		ToWire: a.toWire, TooLargeCode: CodeTooLarge, InternalCode: CodeInternal,
		MessageMember: "message", EscapeHTML: true, Log: o.Logger}
	return a
}

// ServeHTTP dispatches on X-Amz-Target.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.h.ServeHTTP(w, r) }

// arn builds a resource ARN; SageMaker lower-cases the name.
func (a *API) arn(resource, name string) string {
	kind := map[string]string{endpoint.ResModel: "model", endpoint.ResConfig: "endpoint-config", endpoint.ResEndpoint: "endpoint"}[resource]
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:%s/%s", a.opts.Region, a.opts.AccountID, kind, strings.ToLower(name))
}

// Epoch is the AWS JSON timestamp, shared with the other AWS API.
type Epoch = awsjson.Epoch

// decode is awsjson.Decode: an empty body is {}, a mistyped one a
// SerializationException.
func decode(body []byte, v any) error { return awsjson.Decode(body, v) }
