package kubeapi

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	nodepoolmanifests "github.com/capstan-dev/capstan/deploy/nodepools"
	operatormanifests "github.com/capstan-dev/capstan/deploy/operator"
	spacesmanifests "github.com/capstan-dev/capstan/deploy/spaces"
)

// column is one printer column of a kind's table.
type column struct {
	Name, Type, Format, Description, JSONPath string
	Priority                                  int32
}

// crds are the CRDs the operator installs (deploy/operator/crds), those of
// the spaces' kinds (deploy/spaces/crds) and of the node kinds
// (deploy/nodepools/crds): the kinds whose printer columns and OpenAPI
// schemas this server answers with, as a kube-apiserver with them
// installed does.
func crds() ([]apiextv1.CustomResourceDefinition, error) {
	var out []apiextv1.CustomResourceDefinition
	for _, read := range []func() ([]apiextv1.CustomResourceDefinition, error){operatormanifests.CRDs, spacesmanifests.CRDs, nodepoolmanifests.CRDs} {
		defs, err := read()
		if err != nil {
			return nil, err
		}
		out = append(out, defs...)
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
