package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watch streams what changes in the collection r names: it re-reads the
// collection every WatchPoll of the clock and sends ADDED, MODIFIED and
// DELETED events for the objects the selectors match, until the client
// leaves, timeoutSeconds (at most MaxWatch) pass, or a read fails (an
// ERROR event). Without a resourceVersion (or with "0") it first sends
// every object as ADDED; with one, the objects changed since.
func (h *Handler) watch(w http.ResponseWriter, r *http.Request, q query) {
	h.watchWith(w, r, q, func() ([]any, map[string]any, error) { return h.snapshot(r, q) })
}

// watchWith is watch over what read returns: the matching items and the
// answer they came in.
func (h *Handler) watchWith(w http.ResponseWriter, r *http.Request, q query, read func() ([]any, map[string]any, error)) {
	ctx := r.Context()
	since, err := strconv.ParseUint(q.resourceVersion, 10, 64)
	if q.resourceVersion != "" && err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion=%q must be a number", q.resourceVersion)))
		return
	}
	items, list, err := read()
	if err != nil {
		writeStatus(w, err)
		return
	}
	if q.sendInitialEvents {
		since = 0
	}
	limit := h.o.MaxWatch
	if q.timeout > 0 && q.timeout < limit {
		limit = q.timeout
	}
	end := h.o.Clock.NewTimer(limit)
	defer end.Stop()
	tick := h.o.Clock.NewTicker(h.o.WatchPoll)
	defer tick.Stop()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(typ watch.EventType, obj any) bool {
		var v any = obj
		if q.table != "" {
			v = h.table(obj.(map[string]any), q)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}

	seen := map[string]any{}
	for _, it := range items {
		seen[uidOf(it)] = it
		if since == 0 || resourceVersion(it) > since {
			typ := watch.Added
			if since != 0 {
				typ = watch.Modified
			}
			if !send(typ, it) {
				return
			}
		}
	}
	if q.sendInitialEvents && !sendBookmark(enc, list, items) {
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C():
			return
		case <-tick.C():
		}
		items, _, err := read()
		if err != nil {
			st, ok := err.(apierrors.APIStatus)
			if !ok {
				st = apierrors.NewInternalError(err)
			}
			s := st.Status()
			s.Kind, s.APIVersion = "Status", "v1"
			raw, _ := json.Marshal(&s)
			_ = enc.Encode(&metav1.WatchEvent{Type: string(watch.Error), Object: runtime.RawExtension{Raw: raw}})
			return
		}
		now := map[string]any{}
		for _, it := range items {
			id := uidOf(it)
			now[id] = it
			prev, ok := seen[id]
			switch {
			case !ok:
				if !send(watch.Added, it) {
					return
				}
			case !reflect.DeepEqual(it, prev):
				if !send(watch.Modified, it) {
					return
				}
			}
		}
		gone := make([]string, 0)
		for id := range seen {
			if _, ok := now[id]; !ok {
				gone = append(gone, id)
			}
		}
		sort.Strings(gone)
		for _, id := range gone {
			if !send(watch.Deleted, seen[id]) {
				return
			}
		}
		seen = now
	}
}

// sendBookmark ends a streaming list's initial events: a BOOKMARK of the
// list's kind at the newest resourceVersion, annotated as the end.
func sendBookmark(enc *json.Encoder, list map[string]any, items []any) bool {
	var newest uint64
	for _, it := range items {
		newest = max(newest, resourceVersion(it))
	}
	kind, _ := list["kind"].(string)
	obj := map[string]any{"kind": strings.TrimSuffix(kind, "List"), "apiVersion": list["apiVersion"],
		"metadata": map[string]any{"resourceVersion": fmt.Sprint(newest),
			"annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}}}
	raw, err := json.Marshal(obj)
	if err != nil {
		return false
	}
	return enc.Encode(&metav1.WatchEvent{Type: string(watch.Bookmark), Object: runtime.RawExtension{Raw: raw}}) == nil
}

// snapshot reads the collection (or the one object) r names and returns
// the items the query's selectors match, with the answer they came in; a
// missing object is none.
func (h *Handler) snapshot(r *http.Request, q query) ([]any, map[string]any, error) {
	code, body, _ := h.call(r, r.URL.Path)
	if code == http.StatusNotFound {
		if st, err := decode(body); err == nil && st["kind"] == "Status" {
			if d, _ := st["details"].(map[string]any); d != nil && d["name"] != nil {
				return nil, map[string]any{}, nil // the object is gone (or not yet there)
			}
		}
	}
	if code != http.StatusOK {
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err == nil && st.Kind == "Status" {
			return nil, nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, nil, fmt.Errorf("kubeapi: read %s: HTTP %d", r.URL.Path, code)
	}
	v, err := decode(body)
	if err != nil {
		return nil, nil, err
	}
	items, isList := listItems(v)
	if !isList {
		items = []any{v}
	}
	return q.filter(items), v, nil
}
