package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Limits on what Decode accepts, so a hostile or mistaken upload cannot make
// the server parse without bound.
const (
	MaxManifestBytes = 1 << 20
	MaxDocuments     = 100
)

// Decode parses one or more YAML (or JSON) documents separated by "---"
// lines. Decoding is strict: unknown fields, duplicate keys and values of the
// wrong type are errors naming their field path. Empty documents are
// skipped. Every bad document is reported (errors.Join of *DocumentError);
// on any error no objects are returned. Decode neither defaults nor
// validates: see Load.
func Decode(data []byte) ([]Object, error) {
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest is %d bytes; the limit is %d", len(data), MaxManifestBytes)
	}
	docs := splitDocuments(data)
	if len(docs) > MaxDocuments {
		return nil, fmt.Errorf("manifest has %d documents; the limit is %d", len(docs), MaxDocuments)
	}
	var objs []Object
	var errs []error
	for i, d := range docs {
		o, err := decodeOne(d.text)
		if err != nil {
			de := &DocumentError{Index: i, Line: d.line, Err: err}
			var h header
			if json.Unmarshal(mustJSON(d.text), &h) == nil {
				de.Kind, de.Name = h.Kind, h.Metadata.Name
			}
			errs = append(errs, de)
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

// Load decodes, defaults and validates every document; errors from all
// documents are reported together.
func Load(data []byte) ([]Object, error) {
	objs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, o := range objs {
		o.Default()
		if err := o.Validate(); err != nil {
			errs = append(errs, &DocumentError{Index: i, Kind: o.GetKind(), Name: o.GetMeta().Name, Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

type document struct {
	text []byte
	line int // 1-based line of the document's first line in the file
}

// splitDocuments cuts at lines that are "---" (optionally followed by
// space and a comment) and drops documents holding only blank lines,
// comments or the "..." end marker.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, content := 1, false
	flush := func() {
		if content {
			docs = append(docs, document{text: bytes.Clone(cur.Bytes()), line: start})
		}
		cur.Reset()
		content = false
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for n, ln := range lines {
		t := bytes.TrimRight(ln, "\r\n")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) || bytes.HasPrefix(t, []byte("---\t")) {
			flush()
			start = n + 2
			// "--- {kind: …}" puts content on the marker line itself.
			if rest := bytes.TrimSpace(t[3:]); len(rest) > 0 && rest[0] != '#' {
				cur.Write(rest)
				cur.WriteByte('\n')
				start, content = n+1, true
			}
			continue
		}
		trim := bytes.TrimSpace(t)
		if len(trim) > 0 && trim[0] != '#' && !bytes.Equal(trim, []byte("...")) {
			if !content {
				start = n + 1
			}
			content = true
		}
		cur.Write(ln)
	}
	flush()
	return docs
}

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func mustJSON(y []byte) []byte {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return nil
	}
	return j
}

func decodeOne(y []byte) (Object, error) {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return nil, ErrorList{{Message: "invalid YAML: " + err.Error()}}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, ErrorList{{Message: "invalid document: " + err.Error()}}
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, ErrorList{{Message: "a manifest must be a mapping with apiVersion, kind, metadata and spec"}}
	}
	var errs ErrorList
	av, _ := m["apiVersion"].(string)
	switch {
	case m["apiVersion"] == nil:
		errs.add("apiVersion", "required; must be %s", APIVersion)
	case av != APIVersion:
		errs.add("apiVersion", "unsupported value %q; must be %s", fmt.Sprint(m["apiVersion"]), APIVersion)
	}
	var obj Object
	kind, _ := m["kind"].(string)
	switch kind {
	case KindInferenceEndpointConfig:
		obj = &InferenceEndpointConfig{}
	case KindJumpStartModel:
		obj = &JumpStartModel{}
	case "":
		errs.add("kind", "required; must be %s or %s", KindInferenceEndpointConfig, KindJumpStartModel)
	default:
		errs.add("kind", "unsupported kind %q; must be %s or %s", kind, KindInferenceEndpointConfig, KindJumpStartModel)
	}
	if obj == nil {
		return nil, errs
	}
	checkValue(raw, reflect.TypeOf(obj).Elem(), "", &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	// The walk above has checked every key and type, so this cannot fail on
	// user input; an error here is a bug in checkValue.
	if err := json.Unmarshal(j, obj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	return obj, nil
}

var (
	// managedFieldsType is checked by encoding/json and server-side apply's
	// own validation, not walked: its fieldsV1 is free-form.
	managedFieldsType = reflect.TypeFor[[]metav1.ManagedFieldsEntry]()
	quantityType      = reflect.TypeFor[Quantity]()
	timeType          = reflect.TypeFor[time.Time]()
	rawType           = reflect.TypeFor[json.RawMessage]()
)

// checkValue walks a generic JSON value against the Go type it will be
// decoded into, reporting unknown fields and type mismatches with their
// path. encoding/json's DisallowUnknownFields names neither the path nor
// all offenders, and matches keys case-insensitively; this walk does both
// strictly.
func checkValue(v any, t reflect.Type, p path, errs *ErrorList) {
	if v == nil {
		return // null leaves the zero value, as in Kubernetes
	}
	switch t {
	case rawType:
		return
	case managedFieldsType:
		if _, ok := v.([]any); !ok {
			errs.add(p, "must be a list of managed fields entries, got %s", describe(v))
		}
		return
	case quantityType:
		switch v.(type) {
		case string, json.Number:
		default:
			errs.add(p, "must be a quantity (a string such as \"30Gi\" or a number), got %s", describe(v))
		}
		return
	case timeType:
		s, ok := v.(string)
		if !ok {
			errs.add(p, "must be an RFC 3339 timestamp, got %s", describe(v))
		} else if _, err := time.Parse(time.RFC3339, s); err != nil {
			errs.add(p, "must be an RFC 3339 timestamp: %v", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(v, t.Elem(), p, errs)
	case reflect.Interface:
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			errs.add(p, "must be an object, got %s", describe(v))
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				msg := "unknown field"
				for name := range fields {
					if strings.EqualFold(name, k) {
						msg += fmt.Sprintf(" (did you mean %q?)", name)
					}
				}
				errs.add(p.child(k), "%s", msg)
				continue
			}
			checkValue(m[k], ft, p.child(k), errs)
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			errs.add(p, "must be a list, got %s", describe(v))
			return
		}
		for i, e := range a {
			checkValue(e, t.Elem(), p.index(i), errs)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			errs.add(p, "must be an object, got %s", describe(v))
			return
		}
		for k, e := range m {
			checkValue(e, t.Elem(), p.key(k), errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			errs.add(p, "must be a string, got %s", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			errs.add(p, "must be true or false, got %s", describe(v))
		}
	case reflect.Int32, reflect.Int64, reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			errs.add(p, "must be an integer, got %s", describe(v))
			return
		}
		i, err := n.Int64()
		if err != nil {
			errs.add(p, "must be an integer, got %s", n)
			return
		}
		if reflect.Zero(t).OverflowInt(i) {
			errs.add(p, "%d is out of range", i)
		}
	case reflect.Float64, reflect.Float32:
		n, ok := v.(json.Number)
		if !ok {
			errs.add(p, "must be a number, got %s", describe(v))
			return
		}
		if _, err := n.Float64(); err != nil {
			errs.add(p, "must be a number, got %s", n)
		}
	default:
		errs.add(p, "unsupported field type %s", t)
	}
}

// jsonFields maps JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + x.String()
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// DecodeStrict decodes one YAML or JSON document into obj, a pointer to the
// Go type of another API group's kind (package workspace's), with the
// strictness of Decode: every unknown field and wrong type is refused with
// its path, in an ErrorList. It does not check apiVersion or kind.
func DecodeStrict(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return ErrorList{{Message: "invalid YAML: " + err.Error()}}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return ErrorList{{Message: "invalid document: " + err.Error()}}
	}
	if _, ok := raw.(map[string]any); !ok {
		return ErrorList{{Message: "a manifest must be a mapping with apiVersion, kind, metadata and spec"}}
	}
	var errs ErrorList
	checkValue(raw, reflect.TypeOf(obj).Elem(), "", &errs)
	if len(errs) > 0 {
		return errs
	}
	if err := json.Unmarshal(j, obj); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// Add appends a FieldError at path p (exported for other kinds' validators).
func (l *ErrorList) Add(p, format string, args ...any) { l.add(path(p), format, args...) }

// Err is nil for an empty list, else the list.
func (l ErrorList) Err() error { return l.err() }
