package kubeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Options configure a Handler.
type Options struct {
	// APIs serves every group version in Groups: its discovery document at
	// /apis/<group>/<version>, its collections, objects and their
	// …/{name}/events (capstan's manifest and workspace handlers).
	APIs http.Handler
	// Groups are the group versions APIs serves, in the order /apis lists
	// them.
	Groups []schema.GroupVersion
	Clock  clock.Clock
	Logger *slog.Logger
	// WatchPoll is how often a watch re-reads its collection (default 1s).
	WatchPoll time.Duration
	// NodesPath is where Options.APIs lists the cluster nodes
	// (nodeapi's /apis/capstan.dev/v1/nodes), served as core/v1 Nodes;
	// empty: no nodes.
	NodesPath string
	// MaxWatch bounds a watch's length (default 30 minutes); a client's
	// timeoutSeconds may ask for less.
	MaxWatch time.Duration
}

// Handler serves /api, /apis, /version and, through Options.APIs, every
// path under /apis/.
type Handler struct {
	o       Options
	log     *slog.Logger
	columns map[string][]column // printer columns by kind
	openapi map[string][]byte   // OpenAPI v3 documents by group version
	v2      *openAPIV2
}

var _ http.Handler = (*Handler)(nil)

// New returns a Handler over o.APIs.
func New(o Options) (*Handler, error) {
	if o.APIs == nil || o.Clock == nil {
		return nil, errors.New("kubeapi: Options.APIs and Options.Clock are required")
	}
	if o.WatchPoll <= 0 {
		o.WatchPoll = time.Second
	}
	if o.MaxWatch <= 0 {
		o.MaxWatch = 30 * time.Minute
	}
	defs, err := crds()
	if err != nil {
		return nil, err
	}
	v2, err := buildOpenAPIV2(defs)
	if err != nil {
		return nil, err
	}
	h := &Handler{o: o, log: o.Logger, columns: printerColumns(defs), openapi: openAPIDocs(defs), v2: v2}
	h.columns["Node"] = nodeColumns
	h.columns["Pod"] = podColumns
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Paths are the paths outside /apis/ the Handler answers.
var Paths = []string{"/api", "/api/", "/version", "/openapi/v2", "/openapi/v3", "/openapi/v3/"}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case p == "/version" && get:
		writeJSON(w, http.StatusOK, serverVersion())
	case (p == "/api" || p == "/apis") && get && acceptsAggregated(r.Header.Get("Accept")):
		h.aggregated(w, r, p == "/api")
	case p == "/api" && get:
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case p == "/api/v1" && get:
		writeJSON(w, http.StatusOK, coreResources())
	case strings.HasPrefix(p, "/api/v1/") && get:
		h.core(w, r)
	case p == "/openapi/v2" && get:
		h.v2.serve(w, r)
	case (p == "/openapi/v3" || strings.HasPrefix(p, "/openapi/v3/")) && get:
		h.openAPI(w, r, strings.TrimPrefix(strings.TrimPrefix(p, "/openapi/v3"), "/"))
	case p == "/apis" && get:
		h.groupList(w, r)
	case strings.HasPrefix(p, "/apis/"):
		h.apis(w, r)
	default:
		writeStatus(w, notFound(r.URL.Path))
	}
}

// KubernetesVersion is the Kubernetes release whose API types capstan
// serves: that of the k8s.io/apimachinery module it is built with (v0.N.M is
// Kubernetes 1.N.M; a test holds the two together).
const KubernetesVersion = "v1.37.2"

// serverVersion is /version: KubernetesVersion, marked as capstan's.
func serverVersion() *version.Info {
	var major, minor, patch int
	_, _ = fmt.Sscanf(KubernetesVersion, "v%d.%d.%d", &major, &minor, &patch)
	return &version.Info{Major: fmt.Sprint(major), Minor: fmt.Sprint(minor), GitVersion: KubernetesVersion + "+capstan",
		GoVersion: goruntime.Version(), Compiler: goruntime.Compiler, Platform: goruntime.GOOS + "/" + goruntime.GOARCH}
}

// groupList is /apis: every group version of Options.Groups.
func (h *Handler) groupList(w http.ResponseWriter, r *http.Request) {
	l := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, gv := range h.o.Groups {
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		l.Groups = append(l.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	writeJSON(w, http.StatusOK, &l)
}

// apis serves a path under /apis/: discovery of a group version with the
// verbs this Handler adds, a watch, a table, a filtered list, or what
// Options.APIs answers.
func (h *Handler) apis(w http.ResponseWriter, r *http.Request) {
	rest, ok := h.groupVersion(r.URL.Path)
	if !ok {
		h.o.APIs.ServeHTTP(w, r)
		return
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if !get {
		h.o.APIs.ServeHTTP(w, r)
		return
	}
	if rest == "" {
		h.discovery(w, r)
		return
	}
	q, err := readQuery(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if q.watch {
		h.watch(w, r, q)
		return
	}
	code, body, hdr := h.call(r, r.URL.Path)
	if code != http.StatusOK {
		passThrough(w, code, hdr, body)
		return
	}
	if q.table == "" && !isList(body) {
		passThrough(w, code, hdr, body) // one object, answered as it is
		return
	}
	v, err := decode(body)
	if err != nil { // not a JSON object: passed on as it is
		passThrough(w, code, hdr, body)
		return
	}
	// The owner's headers (its Date, from the server's clock) stay; the
	// body is re-encoded.
	copyHeader(w.Header(), hdr)
	w.Header().Del("Content-Length")
	if items, isList := listItems(v); isList {
		q.pageList(v, q.filter(items))
	}
	if q.table != "" {
		writeJSON(w, http.StatusOK, h.table(v, q))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// groupVersion reports whether a path under /apis/ is in a group version
// of Options.Groups, and the rest of the path after it.
func (h *Handler) groupVersion(p string) (string, bool) {
	for _, gv := range h.o.Groups {
		base := "/apis/" + gv.String()
		if rest, ok := strings.CutPrefix(p, base); ok && (rest == "" || rest[0] == '/') {
			return strings.Trim(rest, "/"), true
		}
	}
	return "", false
}

// discovery passes a group version's resource list through with the verbs
// this Handler adds to every resource (watch) and the "all" category.
func (h *Handler) discovery(w http.ResponseWriter, r *http.Request) {
	code, body, hdr := h.call(r, r.URL.Path)
	if code != http.StatusOK {
		passThrough(w, code, hdr, body)
		return
	}
	l, err := parseResourceList(r.URL.Path, body)
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// call asks Options.APIs for GET path with r's credentials and returns its
// answer.
func (h *Handler) call(r *http.Request, path string) (int, []byte, http.Header) {
	req := r.Clone(r.Context())
	req.Method = http.MethodGet
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery, req.RequestURI = path, "", "", ""
	req.Header.Del("Accept")
	rec := httptest.NewRecorder()
	h.o.APIs.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), rec.Header()
}

// decode reads a JSON object, keeping numbers as they are written.
func decode(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("kubeapi: decode an answer: %w", err)
	}
	return v, nil
}

// listItems returns the items of a list answer (kind …List).
func listItems(v map[string]any) ([]any, bool) {
	kind, _ := v["kind"].(string)
	items, ok := v["items"].([]any)
	if !strings.HasSuffix(kind, "List") {
		return nil, false
	}
	if !ok {
		items = []any{}
	}
	return items, true
}

// isList reports whether body is a JSON object whose kind is a list, which
// this Handler filters and pages; reading the kind alone keeps a single
// object's GET from being decoded into maps and written again.
func isList(body []byte) bool {
	var head struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(body, &head) == nil && strings.HasSuffix(head.Kind, "List")
}

// setListVersion gives a list the resource version a watch continues from:
// the newest of its items'.
func setListVersion(v map[string]any) {
	items, _ := v["items"].([]any)
	var newest uint64
	for _, it := range items {
		newest = max(newest, resourceVersion(it))
	}
	md, _ := v["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["resourceVersion"] = fmt.Sprint(newest)
	v["metadata"] = md
}

// pageList sets the list v's items to the page of items q asks for, with
// the resourceVersion of the whole list and the continue token of the rest.
func (q query) pageList(v map[string]any, items []any) {
	if items == nil {
		items = []any{}
	}
	v["items"] = items
	setListVersion(v) // of the whole list, not of a page
	page, next, remaining := q.page(items)
	v["items"] = page
	if next != "" {
		md := v["metadata"].(map[string]any)
		md["continue"], md["remainingItemCount"] = next, remaining
	}
}

// passThrough writes an answer of Options.APIs as it came.
func passThrough(w http.ResponseWriter, code int, hdr http.Header, body []byte) {
	copyHeader(w.Header(), hdr)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone
}

// acceptsTable reports which meta.k8s.io Table version the Accept header
// asks for first ("" for none).
func acceptsTable(accept string) string {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || (mt != "application/json" && mt != "*/*") {
			continue
		}
		if params["as"] != "Table" {
			return "" // a plain type listed first wins
		}
		if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
			return params["v"]
		}
	}
	return ""
}
