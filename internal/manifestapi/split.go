package manifestapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Document is one document of a multi-document YAML body.
type Document struct {
	Text []byte
	Line int // 1-based line of its first content line
}

// SplitDocuments cuts a body at "---" lines the way manifest.Decode does,
// dropping documents that hold only blank lines, comments or "...". The
// handler uses it to enforce the document cap before decoding, and to
// report the line of each document.
func SplitDocuments(data []byte) []Document {
	var docs []Document
	var cur bytes.Buffer
	start, content := 1, false
	flush := func() {
		if content {
			docs = append(docs, Document{Text: bytes.Clone(cur.Bytes()), Line: start})
		}
		cur.Reset()
		content = false
	}
	for n, ln := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimRight(ln, "\r\n")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) || bytes.HasPrefix(t, []byte("---\t")) {
			flush()
			if rest := bytes.TrimSpace(t[3:]); len(rest) > 0 && rest[0] != '#' {
				cur.Write(rest)
				cur.WriteByte('\n')
				start, content = n+1, true
			}
			continue
		}
		if trim := bytes.TrimSpace(t); len(trim) > 0 && trim[0] != '#' && !bytes.Equal(trim, []byte("...")) {
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

// ObjectRef identifies an object named in a manifest.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string // "" when the manifest does not say
	Name       string
	Line       int
}

// ReadRefs reads only apiVersion, kind and metadata of every document,
// ignoring the rest, so `capstan delete -f` works on a manifest that no
// longer validates.
func ReadRefs(data []byte) ([]ObjectRef, error) {
	var refs []ObjectRef
	for i, d := range SplitDocuments(data) {
		var h struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		j, err := yaml.YAMLToJSON(d.Text)
		if err == nil {
			err = json.Unmarshal(j, &h)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (line %d): %w", i, d.Line, err)
		}
		if h.Kind == "" || h.Metadata.Name == "" {
			return nil, fmt.Errorf("document %d (line %d): kind and metadata.name are required", i, d.Line)
		}
		refs = append(refs, ObjectRef{APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name, Line: d.Line})
	}
	return refs, nil
}
