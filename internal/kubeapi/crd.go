package kubeapi

import (
	"fmt"
	"io/fs"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	operatormanifests "github.com/capstan-dev/capstan/deploy/operator"
)

// column is one printer column of a kind's table.
type column struct {
	Name, Type, Format, Description, JSONPath string
	Priority                                  int32
}

// crds reads the CRDs the operator installs (deploy/operator/crds): the
// kinds whose printer columns and OpenAPI schemas this server answers with,
// as the operator's kube-apiserver does.
func crds() ([]apiextv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(operatormanifests.Files, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []apiextv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := fs.ReadFile(operatormanifests.Files, f)
		if err != nil {
			return nil, err
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(raw), "---\n")), &crd); err != nil {
			return nil, fmt.Errorf("kubeapi: %s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// printerColumns are the served versions' printer columns, by kind.
func printerColumns(defs []apiextv1.CustomResourceDefinition) map[string][]column {
	out := map[string][]column{}
	for _, crd := range defs {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			var cols []column
			for _, c := range v.AdditionalPrinterColumns {
				cols = append(cols, column{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description,
					JSONPath: c.JSONPath, Priority: c.Priority})
			}
			out[crd.Spec.Names.Kind] = cols
		}
	}
	return out
}
