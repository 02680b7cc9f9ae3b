package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// coreResources is /api/v1: the core kinds capstan answers, read-only
// (nodes are capstan's cluster nodes; pods, what runs on them).
func coreResources() *metav1.APIResourceList {
	read := metav1.Verbs{"get", "list"}
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", Verbs: read, ShortNames: []string{"ev"}},
			{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: read, ShortNames: []string{"ns"}},
			{Name: "nodes", SingularName: "node", Kind: "Node", Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"no"}},
			{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"po"}},
		}}
}

// maxEventObjects bounds how many objects one events list reads the events
// of (a list without involvedObject.name reads every object's).
const maxEventObjects = 1000

// core serves /api/v1/…: events, namespaces and nodes.
func (h *Handler) core(w http.ResponseWriter, r *http.Request) {
	seg := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/api/v1/"), "/"), "/")
	switch {
	case len(seg) == 1 && seg[0] == "events":
		h.events(w, r, "")
	case len(seg) == 3 && seg[0] == "namespaces" && seg[2] == "events":
		h.events(w, r, seg[1])
	case len(seg) == 1 && seg[0] == "nodes":
		h.nodes(w, r, "")
	case len(seg) == 2 && seg[0] == "nodes":
		h.nodes(w, r, seg[1])
	case len(seg) == 1 && seg[0] == "pods":
		h.pods(w, r, "", "")
	case len(seg) == 3 && seg[0] == "namespaces" && seg[2] == "pods":
		h.pods(w, r, seg[1], "")
	case len(seg) == 4 && seg[0] == "namespaces" && seg[2] == "pods":
		h.pods(w, r, seg[1], seg[3])
	case len(seg) == 1 && seg[0] == "namespaces":
		h.namespaces(w, r, "")
	case len(seg) == 2 && seg[0] == "namespaces":
		h.namespaces(w, r, seg[1])
	default:
		writeStatus(w, notFound(r.URL.Path))
	}
}

// kindResource is one served resource, found by kind.
type kindResource struct {
	gv     string
	plural string
	kind   string
}

// resources lists every resource of Options.Groups from their discovery.
func (h *Handler) resources(r *http.Request) []kindResource {
	var out []kindResource
	for _, gv := range h.o.Groups {
		l, err := h.resourceList(r, "/apis/"+gv.String())
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if !strings.Contains(res.Name, "/") {
				out = append(out, kindResource{gv: gv.String(), plural: res.Name, kind: res.Kind})
			}
		}
	}
	return out
}

// objects lists the objects of res in namespace ns ("" for all).
func (h *Handler) objects(r *http.Request, res kindResource, ns string) []any {
	p := "/apis/" + res.gv + "/" + res.plural
	if ns != "" {
		p = "/apis/" + res.gv + "/namespaces/" + ns + "/" + res.plural
	}
	code, body, _ := h.call(r, p)
	if code != http.StatusOK {
		return nil
	}
	v, err := decode(body)
	if err != nil {
		return nil
	}
	items, _ := listItems(v)
	return items
}

// events answers a core/v1 EventList for the objects the fieldSelector's
// involvedObject.{kind,name,namespace,uid} names, from each object's own
// events.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, ns string) {
	sel := fields.Everything()
	if s := r.URL.Query().Get("fieldSelector"); s != "" {
		if err := selectorLen("fieldSelector", s); err != nil {
			writeStatus(w, err)
			return
		}
		var err error
		if sel, err = fields.ParseSelector(s); err != nil {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("fieldSelector: %v", err)))
			return
		}
	}
	want := func(f string) string { v, _ := sel.RequiresExactMatch(f); return v }
	if v := want("involvedObject.namespace"); v != "" {
		if ns != "" && ns != v {
			writeJSON(w, http.StatusOK, eventList(nil))
			return
		}
		ns = v
	}
	kind, name, uid := want("involvedObject.kind"), want("involvedObject.name"), want("involvedObject.uid")
	var out []corev1.Event
	read := 0
	for _, res := range h.resources(r) {
		if kind != "" && res.kind != kind {
			continue
		}
		for _, obj := range h.objects(r, res, ns) {
			md := metadataOf(obj)
			oname, _ := md["name"].(string)
			ons, _ := md["namespace"].(string)
			ouid, _ := md["uid"].(string)
			if (name != "" && oname != name) || (uid != "" && ouid != uid) {
				continue
			}
			if read++; read > maxEventObjects {
				break
			}
			ref := corev1.ObjectReference{Kind: res.kind, APIVersion: res.gv, Namespace: ons, Name: oname, UID: types.UID(ouid)}
			out = append(out, h.objectEvents(r, res, ref)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTimestamp.Before(&out[j].LastTimestamp) })
	writeJSON(w, http.StatusOK, eventList(out))
}

// objectEvents reads one object's events (…/{name}/events) as core/v1
// Events about ref.
func (h *Handler) objectEvents(r *http.Request, res kindResource, ref corev1.ObjectReference) []corev1.Event {
	code, body, _ := h.call(r, "/apis/"+res.gv+"/namespaces/"+ref.Namespace+"/"+res.plural+"/"+ref.Name+"/events")
	if code != http.StatusOK {
		return nil
	}
	var l struct {
		Items []struct {
			Time    time.Time `json:"time"`
			Type    string    `json:"type"`
			Reason  string    `json:"reason"`
			Message string    `json:"message"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &l) != nil {
		return nil
	}
	out := make([]corev1.Event, 0, len(l.Items))
	for i, e := range l.Items {
		t := metav1.NewTime(e.Time)
		out = append(out, corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", ref.Name, i), Namespace: ref.Namespace, CreationTimestamp: t},
			InvolvedObject: ref, Reason: e.Reason, Message: e.Message, Type: e.Type,
			FirstTimestamp: t, LastTimestamp: t, Count: 1, Source: corev1.EventSource{Component: "capstan"},
			ReportingController: "capstan"})
	}
	return out
}

func eventList(items []corev1.Event) *corev1.EventList {
	if items == nil {
		items = []corev1.Event{}
	}
	return &corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, Items: items}
}

// namespaces answers the core/v1 namespaces: "default" and every namespace
// an object is in; name picks one.
func (h *Handler) namespaces(w http.ResponseWriter, r *http.Request, name string) {
	seen := map[string]bool{"default": true}
	for _, res := range h.resources(r) {
		for _, obj := range h.objects(r, res, "") {
			if ns, _ := metadataOf(obj)["namespace"].(string); ns != "" {
				seen[ns] = true
			}
		}
	}
	ns := func(n string) corev1.Namespace {
		return corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	}
	if name != "" {
		if !seen[name] {
			writeStatus(w, apierrors.NewNotFound(corev1.Resource("namespaces"), name))
			return
		}
		writeJSON(w, http.StatusOK, ns(name))
		return
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	l := corev1.NamespaceList{TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"}}
	for _, n := range names {
		l.Items = append(l.Items, ns(n))
	}
	writeJSON(w, http.StatusOK, &l)
}
