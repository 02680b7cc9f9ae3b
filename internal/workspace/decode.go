package workspace

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// Object is a Workspace or a WorkspaceTemplate.
type Object interface {
	GetKind() string
	GetMeta() *manifest.ObjectMeta
	Default()
	Validate() error
}

var (
	_ Object = (*Workspace)(nil)
	_ Object = (*WorkspaceTemplate)(nil)
)

func (w *Workspace) GetKind() string                       { return KindWorkspace }
func (w *Workspace) GetMeta() *manifest.ObjectMeta         { return &w.Metadata }
func (t *WorkspaceTemplate) GetKind() string               { return KindWorkspaceTemplate }
func (t *WorkspaceTemplate) GetMeta() *manifest.ObjectMeta { return &t.Metadata }

// IsDocument reports whether a YAML or JSON document is of this API group
// (its apiVersion is workspace.jupyter.org/…), so a multi-document file can
// be split between the APIs that serve its kinds.
func IsDocument(doc []byte) bool {
	var h struct {
		APIVersion string `json:"apiVersion"`
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil || json.Unmarshal(j, &h) != nil {
		return false
	}
	return len(h.APIVersion) > len(Group) && h.APIVersion[:len(Group)+1] == Group+"/"
}

// Decode reads one document strictly: apiVersion must be APIVersion, kind
// Workspace or WorkspaceTemplate, and every field known and well typed
// (errors name their path).
func Decode(doc []byte) (Object, error) {
	var h struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, manifest.ErrorList{{Message: "invalid YAML: " + err.Error()}}
	}
	if err := json.Unmarshal(j, &h); err != nil {
		return nil, manifest.ErrorList{{Message: "a manifest must be a mapping with apiVersion, kind, metadata and spec"}}
	}
	var errs manifest.ErrorList
	if h.APIVersion != APIVersion {
		errs.Add("apiVersion", "unsupported value %q; must be %s", fmt.Sprint(h.APIVersion), APIVersion)
	}
	var obj Object
	switch h.Kind {
	case KindWorkspace:
		obj = &Workspace{}
	case KindWorkspaceTemplate:
		obj = &WorkspaceTemplate{}
	case nil:
		errs.Add("kind", "required; must be %s or %s", KindWorkspace, KindWorkspaceTemplate)
	default:
		errs.Add("kind", "unsupported kind %q; must be %s or %s", fmt.Sprint(h.Kind), KindWorkspace, KindWorkspaceTemplate)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := manifest.DecodeStrict(doc, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
