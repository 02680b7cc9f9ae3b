package cloudwatch

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/metricstore"
)

// Wire constants of the three protocols.
const (
	// TargetPrefix starts awsJson1_0's X-Amz-Target.
	TargetPrefix = "GraniteServiceVersion20100801."
	// CBORPathPrefix starts smithy-rpc-v2-cbor's request path.
	CBORPathPrefix = "/service/GraniteServiceVersion20100801/operation/"
	// APIVersion is the query protocol's Version.
	APIVersion = "2010-08-01"
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 1 << 20
	xmlNamespace        = "http://monitoring.amazonaws.com/doc/2010-08-01/"
)

// HandlerOptions configure a Handler.
type HandlerOptions struct {
	Clock        clock.Clock
	AccountID    string
	Logger       *slog.Logger
	MaxBodyBytes int64         // 0: DefaultMaxBodyBytes
	RequestID    func() string // nil: a random UUID (tests fix it)
}

// Handler serves the CloudWatch API over HTTP in all three protocols.
type Handler struct {
	svc     *Service
	log     *slog.Logger
	maxBody int64
	reqID   func() string
}

// NewHandler serves the metrics of store.
func NewHandler(store *metricstore.Store, o HandlerOptions) *Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.RequestID == nil {
		o.RequestID = awsjson.UUID
	}
	return &Handler{svc: NewService(store, Options{Clock: o.Clock, AccountID: o.AccountID, Logger: o.Logger}),
		log: o.Logger, maxBody: o.MaxBodyBytes, reqID: o.RequestID}
}

// IsRequest says whether r is addressed to CloudWatch: the CBOR path, the
// JSON 1.0 target, or a query-protocol form (which carries no X-Amz-Target,
// unlike every JSON API capstan serves).
func IsRequest(r *http.Request) bool {
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(r.URL.Path, CBORPathPrefix):
		return true
	case target != "":
		return strings.HasPrefix(target, TargetPrefix)
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded") || r.URL.Query().Has("Action")
}

// protocol is how a request speaks to CloudWatch.
type protocol int

const (
	protoQuery protocol = iota
	protoJSON           // awsJson1_0
	protoCBOR           // smithy-rpc-v2-cbor
)

// protocolOf is the protocol of r, a request IsRequest accepts.
func protocolOf(r *http.Request) protocol {
	switch {
	case strings.HasPrefix(r.URL.Path, CBORPathPrefix):
		return protoCBOR
	case r.Header.Get("X-Amz-Target") != "":
		return protoJSON
	default:
		return protoQuery
	}
}

// ServeHTTP picks the protocol from the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", h.reqID())
	switch protocolOf(r) {
	case protoCBOR:
		h.serveCBOR(w, r)
	case protoJSON:
		h.serveJSON(w, r)
	default:
		h.serveQuery(w, r)
	}
}

// call decodes op's input with decode and runs it: the one dispatch all
// protocols share.
func (h *Handler) call(ctx context.Context, op string, decode func(any) error) (any, error) {
	switch op {
	case "GetMetricStatistics":
		var in GetMetricStatisticsInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return h.svc.GetMetricStatistics(ctx, &in)
	case "GetMetricData":
		var in GetMetricDataInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return h.svc.GetMetricData(ctx, &in)
	case "ListMetrics":
		var in ListMetricsInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return h.svc.ListMetrics(ctx, &in)
	}
	return nil, errUnknownOp
}

var errUnknownOp = &Error{Code: "unknown"}

// wire maps err to its wire form and logs it.
func (h *Handler) wire(op string, err error) *Error {
	we := toWire(err)
	if we.Status >= 500 {
		h.log.Error("cloudwatch internal error", "op", op, "err", err)
	} else {
		h.log.Debug("cloudwatch error", "op", op, "code", we.Code, "message", we.Message)
	}
	return we
}

func (h *Handler) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return awsauth.ReadBody(w, r, h.maxBody)
}

// queryErrorHeader is the awsQueryCompatible header: the query code and fault.
func queryErrorHeader(w http.ResponseWriter, e *Error) {
	w.Header().Set("x-amzn-query-error", e.Code+";"+e.fault())
}

// WriteError answers r, a request IsRequest accepts, in its protocol with
// an error of code (also its shape's name): a refusal made before the
// request reaches a Handler (authentication, rate and body limits).
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	e := &Error{Status: status, Code: code, Shape: code, Sender: status < 500, Message: message}
	switch protocolOf(r) {
	case protoCBOR:
		writeCBORError(w, e)
	case protoJSON:
		writeJSONError(w, e)
	default:
		writeQueryError(w, e)
	}
}
