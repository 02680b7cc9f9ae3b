package kubeapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// query is what a collection or object GET asks for beyond the object.
type query struct {
	watch           bool
	resourceVersion string
	// sendInitialEvents: a streaming list (client-go's WatchList): every
	// object as ADDED, then a bookmark marking the end of them.
	sendInitialEvents bool
	fields            fields.Selector
	labels            labels.Selector
	timeout           time.Duration // 0: the Handler's MaxWatch
	table             string        // meta.k8s.io Table version, "" for none
	includeObject     metav1.IncludeObjectPolicy
	// limit and after page a list: at most limit items (0: all), those
	// whose namespace/name key sorts after after (a continue token's).
	limit int
	after string
}

// maxSelector bounds a selector's length before it is parsed.
const maxSelector = 4096

// objectFields are the field labels every kind selects on.
var objectFields = []string{"metadata.name", "metadata.namespace"}

// readQuery reads a request's list and watch parameters; a field selector
// may name objectFields and extraFields.
func readQuery(r *http.Request, extraFields ...string) (query, error) {
	v := r.URL.Query()
	q := query{resourceVersion: v.Get("resourceVersion"), table: acceptsTable(r.Header.Get("Accept")),
		includeObject: metav1.IncludeObjectPolicy(v.Get("includeObject")), fields: fields.Everything(), labels: labels.Everything()}
	switch w := v.Get("watch"); w {
	case "", "false", "0":
	case "true", "1":
		q.watch = true
	default:
		return q, apierrors.NewBadRequest(fmt.Sprintf("watch=%q must be true or false", w))
	}
	switch s := v.Get("sendInitialEvents"); s {
	case "", "false":
	case "true":
		q.sendInitialEvents = true
	default:
		return q, apierrors.NewBadRequest(fmt.Sprintf("sendInitialEvents=%q must be true or false", s))
	}
	switch q.includeObject {
	case "":
		q.includeObject = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return q, apierrors.NewBadRequest(fmt.Sprintf("includeObject=%q must be None, Metadata or Object", q.includeObject))
	}
	if s := v.Get("fieldSelector"); s != "" {
		if err := selectorLen("fieldSelector", s); err != nil {
			return q, err
		}
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return q, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: %v", err))
		}
		allowed := append(slices.Clone(objectFields), extraFields...)
		for _, req := range sel.Requirements() {
			if !slices.Contains(allowed, req.Field) {
				return q, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s (capstan selects on %s)", req.Field, strings.Join(allowed, ", ")))
			}
		}
		q.fields = sel
	}
	if s := v.Get("labelSelector"); s != "" {
		if err := selectorLen("labelSelector", s); err != nil {
			return q, err
		}
		sel, err := labels.Parse(s)
		if err != nil {
			return q, apierrors.NewBadRequest(fmt.Sprintf("labelSelector: %v", err))
		}
		q.labels = sel
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, apierrors.NewBadRequest(fmt.Sprintf("limit=%q must be a whole number of items", s))
		}
		q.limit = int(min(n, maxItems)) // no list holds more
	}
	if s := v.Get("continue"); s != "" {
		after, err := decodeContinue(s)
		if err != nil {
			return q, err
		}
		q.after = after
	}
	if s := v.Get("timeoutSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > 1<<31 {
			return q, apierrors.NewBadRequest(fmt.Sprintf("timeoutSeconds=%q must be a whole number of seconds", s))
		}
		q.timeout = time.Duration(n) * time.Second
	}
	return q, nil
}

// maxItems is above any collection's size (the stores hold at most 1,000
// objects of a kind): a larger limit is the same as it.
const maxItems = 1 << 20

// page sorts items by namespace and name, keeps those after q.after and at
// most q.limit of them, and returns the continue token of the rest ("" when
// none are left) and how many are left. Unlike the API server's, a page
// reads the collection as it is now, not as it was at the first page: an
// object added or removed between pages shows up or goes accordingly, and
// the token never expires.
func (q query) page(items []any) (kept []any, next string, remaining int) {
	key := func(it any) string {
		md := metadataOf(it)
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		return ns + "/" + name
	}
	if q.limit == 0 && q.after == "" {
		return items, "", 0
	}
	slices.SortFunc(items, func(a, b any) int { return strings.Compare(key(a), key(b)) })
	start, _ := slices.BinarySearchFunc(items, q.after, func(it any, after string) int {
		if k := key(it); k <= after {
			return -1
		}
		return 1
	})
	items = items[start:]
	if q.limit == 0 || len(items) <= q.limit {
		return items, "", 0
	}
	kept = items[:q.limit]
	return kept, encodeContinue(key(kept[len(kept)-1])), len(items) - q.limit
}

// A continue token is the key of the last item a page held, encoded so
// that clients treat it as opaque.
type continueToken struct {
	After string `json:"after"`
}

func encodeContinue(after string) string {
	b, _ := json.Marshal(continueToken{After: after})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (string, error) {
	bad := apierrors.NewBadRequest(fmt.Sprintf("continue=%q is not a continue token of this server", s))
	if len(s) > 1024 {
		return "", bad
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t continueToken
	if err != nil || json.Unmarshal(b, &t) != nil || t.After == "" {
		return "", bad
	}
	return t.After, nil
}

// selectorLen refuses a selector longer than maxSelector before it is
// parsed.
func selectorLen(param, s string) error {
	if len(s) > maxSelector {
		return apierrors.NewBadRequest(fmt.Sprintf("%s is %d bytes; the limit is %d", param, len(s), maxSelector))
	}
	return nil
}

// filters reports whether the query narrows a list.
func (q query) filters() bool { return !q.fields.Empty() || !q.labels.Empty() }

// filter keeps the items the selectors match.
func (q query) filter(items []any) []any {
	if !q.filters() {
		return items
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		if q.matches(it) {
			out = append(out, it)
		}
	}
	return out
}

func (q query) matches(item any) bool {
	md := metadataOf(item)
	fs := fields.Set{}
	for _, req := range q.fields.Requirements() {
		fs[req.Field] = fieldValue(item, req.Field)
	}
	if !q.fields.Matches(fs) {
		return false
	}
	set := labels.Set{}
	if ls, ok := md["labels"].(map[string]any); ok {
		for k, v := range ls {
			if s, ok := v.(string); ok {
				set[k] = s
			}
		}
	}
	return q.labels.Matches(set)
}

// fieldValue is the string at a dotted path of an object ("" when there
// is none), for field selectors.
func fieldValue(obj any, path string) string {
	cur := obj
	for _, seg := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[seg]
	}
	s, _ := cur.(string)
	return s
}

// metadataOf is an object's metadata (nil when it has none).
func metadataOf(obj any) map[string]any {
	o, _ := obj.(map[string]any)
	md, _ := o["metadata"].(map[string]any)
	return md
}

// resourceVersion is an object's metadata.resourceVersion as a number (0
// when it has none).
func resourceVersion(obj any) uint64 {
	s, _ := metadataOf(obj)["resourceVersion"].(string)
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// uidOf is an object's metadata.uid, else its namespace and name.
func uidOf(obj any) string {
	md := metadataOf(obj)
	if uid, _ := md["uid"].(string); uid != "" {
		return uid
	}
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return ns + "/" + name
}

// writeStatus writes err as a metav1.Status: an apierrors.APIStatus as it
// is, anything else as an internal error.
func writeStatus(w http.ResponseWriter, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	_ = json.NewEncoder(w).Encode(&s)
}

func notFound(path string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource " + path}}
}
