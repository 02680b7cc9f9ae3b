package kubeapi

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
)

// nameColumn and ageColumn are what every table has, as the API server
// words them; a kind without printer columns shows these two.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageColumn = column{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
)

// table turns an object or a list of them into the Table `kubectl get`
// prints: the name, then the kind's printer columns (or its age).
func (h *Handler) table(v map[string]any, q query) *metav1.Table {
	items, isList := listItems(v)
	if !isList {
		items = []any{v}
	}
	kind := ""
	if len(items) > 0 {
		kind, _ = items[0].(map[string]any)["kind"].(string)
	}
	cols := h.columnsOf(kind)
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/" + q.table},
		ColumnDefinitions: []metav1.TableColumnDefinition{nameColumn}}
	if md, ok := v["metadata"].(map[string]any); ok && isList {
		t.ResourceVersion, _ = md["resourceVersion"].(string)
		t.Continue, _ = md["continue"].(string)
		if n, ok := md["remainingItemCount"].(int); ok {
			t.RemainingItemCount = new(int64(n))
		}
	}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type,
			Format: c.Format, Description: c.Description, Priority: c.Priority})
	}
	now := h.o.Clock.Now()
	for _, it := range items {
		t.Rows = append(t.Rows, row(it, cols, now, q.includeObject))
	}
	if t.Rows == nil {
		t.Rows = []metav1.TableRow{}
	}
	return t
}

// columnsOf is kind's printer columns, or the age column alone.
func (h *Handler) columnsOf(kind string) []column {
	if cols, ok := h.columns[kind]; ok && len(cols) > 0 {
		return cols
	}
	return []column{ageColumn}
}

// row is one object's table row: cells by column, as the API server fills
// them for a custom resource (a date as an age, a missing value as nil),
// and the object as includeObject asks.
func row(obj any, cols []column, now time.Time, include metav1.IncludeObjectPolicy) metav1.TableRow {
	name, _ := metadataOf(obj)["name"].(string)
	r := metav1.TableRow{Cells: []any{name}}
	for _, c := range cols {
		r.Cells = append(r.Cells, cell(obj, c, now))
	}
	switch include {
	case metav1.IncludeObject:
		raw, _ := json.Marshal(obj)
		r.Object = runtime.RawExtension{Raw: raw}
	case metav1.IncludeMetadata:
		o, _ := obj.(map[string]any)
		pom := map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
		raw, _ := json.Marshal(pom)
		r.Object = runtime.RawExtension{Raw: raw}
	}
	return r
}

// cell evaluates c's JSONPath on obj: the first value found, nil when there
// is none (kubectl prints <none>).
func cell(obj any, c column, now time.Time) any {
	jp := jsonpath.New(c.Name).AllowMissingKeys(true)
	if err := jp.Parse("{" + c.JSONPath + "}"); err != nil {
		return nil
	}
	res, err := jp.FindResults(obj)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return nil
	}
	v := res[0][0].Interface()
	if c.Type == "date" {
		s, _ := v.(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil
		}
		return duration.HumanDuration(now.Sub(t))
	}
	return v
}
