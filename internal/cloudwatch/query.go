package cloudwatch

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of a query-protocol form: list indexes and key depth.
const (
	maxListIndex = 1000
	maxKeyDepth  = 12
)

// serveQuery serves the query protocol: a form POST (or GET) with
// Action=<Op>&Version=2010-08-01, answered in XML.
func (h *Handler) serveQuery(w http.ResponseWriter, r *http.Request) {
	var form url.Values
	switch r.Method {
	case http.MethodPost:
		body, err := h.body(w, r)
		if err != nil {
			h.queryError(w, "", err)
			return
		}
		if form, err = url.ParseQuery(string(body)); err != nil {
			h.queryError(w, "", errorf(http.StatusBadRequest, "MalformedQueryString", "MalformedQueryString", "The query string is not valid: %v", err))
			return
		}
	case http.MethodGet:
		form = r.URL.Query()
	default:
		h.queryError(w, "", errorf(http.StatusMethodNotAllowed, CodeInvalidAction, "InvalidAction", "The query protocol accepts only POST and GET."))
		return
	}
	op := form.Get("Action")
	if op == "" {
		h.queryError(w, op, missing("Action"))
		return
	}
	if v := form.Get("Version"); v != APIVersion {
		h.queryError(w, op, invalidValue("The parameter Version must be %s, not '%s'.", APIVersion, truncate(v)))
		return
	}
	out, err := h.call(r.Context(), op, func(v any) error {
		tree, err := formTree(form)
		if err != nil {
			return err
		}
		return bindQuery(tree, reflect.ValueOf(v).Elem(), "")
	})
	if err == errUnknownOp {
		err = unknownOperation(http.StatusBadRequest, op)
	}
	if err != nil {
		h.queryError(w, op, err)
		return
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<%sResponse xmlns="%s"><%sResult>`, op, xmlNamespace, op)
	writeXMLFields(&buf, reflect.ValueOf(out).Elem())
	fmt.Fprintf(&buf, `</%sResult><ResponseMetadata><RequestId>`, op)
	_ = xml.EscapeText(&buf, []byte(w.Header().Get("x-amzn-RequestId")))
	fmt.Fprintf(&buf, "</RequestId></ResponseMetadata></%sResponse>\n", op)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) queryError(w http.ResponseWriter, op string, err error) {
	writeQueryError(w, h.wire(op, err))
}

// writeQueryError is the one place errors become query-protocol
// ErrorResponses.
func writeQueryError(w http.ResponseWriter, we *Error) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	fmt.Fprintf(&buf, `<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>`, xmlNamespace, we.fault())
	_ = xml.EscapeText(&buf, []byte(we.Code))
	buf.WriteString("</Code><Message>")
	_ = xml.EscapeText(&buf, []byte(we.Message))
	buf.WriteString("</Message></Error><RequestId>")
	_ = xml.EscapeText(&buf, []byte(w.Header().Get("x-amzn-RequestId")))
	buf.WriteString("</RequestId></ErrorResponse>\n")
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(we.Status)
	_, _ = w.Write(buf.Bytes())
}

// qnode is a form parameter tree: "Dimensions.member.1.Name" is
// Dimensions → member → 1 → Name.
type qnode struct {
	val  string
	leaf bool
	kids map[string]*qnode
}

func formTree(form url.Values) (*qnode, error) {
	root := &qnode{}
	for k, vs := range form {
		if k == "Action" || k == "Version" {
			continue
		}
		parts := strings.Split(k, ".")
		if len(parts) > maxKeyDepth {
			return nil, invalidValue("The parameter %s is not valid: it is nested too deep.", truncate(k))
		}
		n := root
		for _, p := range parts {
			if n.kids == nil {
				n.kids = map[string]*qnode{}
			}
			c := n.kids[p]
			if c == nil {
				c = &qnode{}
				n.kids[p] = c
			}
			n = c
		}
		n.leaf, n.val = true, vs[0]
	}
	return root, nil
}

var timestampType = reflect.TypeOf(Timestamp{})

// bindQuery fills v from n, converting the form's strings to v's types;
// path names the parameter in errors.
func bindQuery(n *qnode, v reflect.Value, path string) error {
	if n == nil {
		return nil
	}
	switch {
	case v.Kind() == reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if err := bindQuery(n, e.Elem(), path); err != nil {
			return err
		}
		v.Set(e)
		return nil
	case v.Type() == timestampType:
		var t Timestamp
		if err := t.parseISO(n.val); err != nil {
			return invalidValue("The parameter %s is not valid: %v", path, err)
		}
		v.Set(reflect.ValueOf(t))
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if c := n.kids[f.Name]; c != nil {
				if err := bindQuery(c, v.Field(i), join(path, f.Name)); err != nil {
					return err
				}
			}
		}
	case reflect.Slice:
		members := n.kids["member"]
		idx := []int{}
		if members != nil {
			for k := range members.kids {
				i, err := strconv.Atoi(k)
				if err != nil || i < 1 || i > maxListIndex {
					return invalidValue("The parameter %s.member.%s is not valid: list members are numbered 1 to %d.", path, truncate(k), maxListIndex)
				}
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
		s := reflect.MakeSlice(v.Type(), len(idx), len(idx))
		for j, i := range idx {
			if err := bindQuery(members.kids[strconv.Itoa(i)], s.Index(j), fmt.Sprintf("%s.member.%d", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.String:
		v.SetString(n.val)
	case reflect.Int64:
		i, err := strconv.ParseInt(n.val, 10, 64)
		if err != nil {
			return invalidValue("The parameter %s must be an integer, not '%s'.", path, truncate(n.val))
		}
		v.SetInt(i)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.val)
		if err != nil {
			return invalidValue("The parameter %s must be true or false, not '%s'.", path, truncate(n.val))
		}
		v.SetBool(b)
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// writeXMLFields writes a struct's fields as query-protocol XML: lists as
// <member> elements, maps as <entry><key/><value/></entry>, timestamps in
// ISO 8601; nil pointers, nil maps and empty strings are left out.
func writeXMLFields(buf *bytes.Buffer, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		if (f.Kind() == reflect.Pointer || f.Kind() == reflect.Map || f.Kind() == reflect.Slice) && f.IsNil() || f.Kind() == reflect.String && f.Len() == 0 {
			continue
		}
		buf.WriteString("<" + name + ">")
		writeXMLValue(buf, f)
		buf.WriteString("</" + name + ">")
	}
}

func writeXMLValue(buf *bytes.Buffer, v reflect.Value) {
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Type() == timestampType {
		buf.WriteString(v.Interface().(Timestamp).UTC().Format(time.RFC3339Nano))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		writeXMLFields(buf, v)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			buf.WriteString("<member>")
			writeXMLValue(buf, v.Index(i))
			buf.WriteString("</member>")
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			buf.WriteString("<entry><key>")
			_ = xml.EscapeText(buf, []byte(k.String()))
			buf.WriteString("</key><value>")
			writeXMLValue(buf, v.MapIndex(k))
			buf.WriteString("</value></entry>")
		}
	case reflect.String:
		_ = xml.EscapeText(buf, []byte(v.String()))
	case reflect.Float64:
		buf.WriteString(formatFloat(v.Float()))
	case reflect.Bool:
		buf.WriteString(strconv.FormatBool(v.Bool()))
	}
}

func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
