package nodeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// A cluster's add-ons: what the HyperPod console turns on and off at
// creation and after. Each is a view of cluster settings the SageMaker API
// also reaches (AutoScaling, TieredStorageConfig) or, for observability,
// of the one setting only this API changes.
const (
	// AddonKarpenter is the node autoscaler (AutoScaling, Karpenter).
	AddonKarpenter = "karpenter"
	// AddonObservability is whether capstan's metric store keeps the
	// cluster's series (the console's dashboards).
	AddonObservability = "observability"
	// AddonTieredStorage is the managed tiered KV storage
	// (TieredStorageConfig).
	AddonTieredStorage = "tiered-storage"
)

// addonInfo is each add-on's display name and description, in list order.
var addonInfo = []struct{ name, display, desc string }{
	{AddonKarpenter, "Node autoscaler (Karpenter)",
		"Launches nodes for replicas that wait for room and consolidates idle ones (docs/clusters.md#node-autoscaling); needs a cluster role."},
	{AddonObservability, "Observability",
		"capstan's metric store keeps the cluster's node, GPU and autoscaler series: the console's Cluster dashboard shows them."},
	{AddonTieredStorage, "Tiered storage",
		"A managed tiered KV cache store on every node: a deployment's tieredstorage tier without l2CacheSize gets this share of its node's memory."},
}

// Addon is one add-on of a cluster.
type Addon struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	// InstanceMemoryAllocationPercentage is tiered-storage's share of each
	// node's memory.
	InstanceMemoryAllocationPercentage int `json:"instanceMemoryAllocationPercentage,omitempty"`
}

// AddonChange is the body of PUT …/clusters/{name}/addons/{addon}.
type AddonChange struct {
	Enabled *bool `json:"enabled"`
	// InstanceMemoryAllocationPercentage (tiered-storage, 1–100) is
	// required to turn it on unless the cluster already has one.
	InstanceMemoryAllocationPercentage *int `json:"instanceMemoryAllocationPercentage,omitempty"`
	// ClusterRole (karpenter) is the role the autoscaler acts as, when the
	// cluster has none yet.
	ClusterRole string `json:"clusterRole,omitempty"`
}

// maxAddonBody bounds a PUT's body.
const maxAddonBody = 16 << 10

func addonsOf(c hyperpod.Cluster) []Addon {
	out := make([]Addon, 0, len(addonInfo))
	for _, a := range addonInfo {
		v := Addon{Name: a.name, DisplayName: a.display, Description: a.desc}
		switch a.name {
		case AddonKarpenter:
			v.Enabled = c.AutoScaling.Enabled()
		case AddonObservability:
			v.Enabled = !c.MetricsOff
		case AddonTieredStorage:
			v.Enabled = c.TieredStorage.Enabled()
			v.InstanceMemoryAllocationPercentage = c.TieredStorage.MemoryPercent
		}
		out = append(out, v)
	}
	return out
}

func addonNames() string {
	names := make([]string, len(addonInfo))
	for i, a := range addonInfo {
		names[i] = a.name
	}
	return strings.Join(names, ", ")
}

// addons serves GET …/clusters/{name}/addons.
func (h *Handler) addons(r *http.Request) (any, error) {
	c, _, err := h.o.Clusters.Cluster(r.Context(), r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return List[Addon]{Items: addonsOf(c)}, nil
}

// setAddon serves PUT …/clusters/{name}/addons/{addon}: the node
// autoscaler and tiered storage through UpdateCluster (the cluster must be
// InService, and is Updating after), observability at once in any status
// but Deleting.
func (h *Handler) setAddon(r *http.Request) (any, error) {
	name, addon := r.PathValue("name"), r.PathValue("addon")
	known := false
	for _, a := range addonInfo {
		known = known || a.name == addon
	}
	if !known {
		return nil, fmt.Errorf("%w: no add-on %q; the add-ons are %s", errNotFound, addon, addonNames())
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxAddonBody))
	if err != nil {
		return nil, err
	}
	var ch AddonChange
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ch); err != nil {
		return nil, fmt.Errorf("%w: the body is not an add-on change ({\"enabled\": true|false, …}): %v", errBadRequest, err)
	}
	if ch.Enabled == nil {
		return nil, &invalidError{errors.New("enabled: required (true or false)")}
	}
	if ch.InstanceMemoryAllocationPercentage != nil && addon != AddonTieredStorage {
		return nil, &invalidError{fmt.Errorf("instanceMemoryAllocationPercentage: only the %s add-on takes it", AddonTieredStorage)}
	}
	if ch.ClusterRole != "" && addon != AddonKarpenter {
		return nil, &invalidError{fmt.Errorf("clusterRole: only the %s add-on takes it", AddonKarpenter)}
	}
	c, _, err := h.o.Clusters.Cluster(r.Context(), name)
	if err != nil {
		return nil, err
	}
	on := *ch.Enabled
	switch addon {
	case AddonObservability:
		c, err = h.o.Clusters.SetMetrics(r.Context(), c.Name, on)
	case AddonKarpenter:
		mode := map[bool]string{true: "Enable", false: "Disable"}[on]
		if on && c.ClusterRole == "" && ch.ClusterRole == "" {
			return nil, &invalidError{errors.New("clusterRole: required to turn the node autoscaler on, as the cluster has none (an IAM role ARN)")}
		}
		c, err = h.o.Clusters.UpdateCluster(r.Context(), c.Name, hyperpod.ClusterUpdate{
			AutoScaling: &hyperpod.AutoScaling{Mode: mode, AutoScalerType: "Karpenter"}, ClusterRole: ch.ClusterRole})
	case AddonTieredStorage:
		ts := hyperpod.TieredStorage{Mode: "Disable", MemoryPercent: c.TieredStorage.MemoryPercent}
		if p := ch.InstanceMemoryAllocationPercentage; p != nil {
			if *p < 1 || *p > hyperpod.MaxTieredStoragePercent {
				return nil, &invalidError{fmt.Errorf("instanceMemoryAllocationPercentage: %d must be 1 to %d", *p, hyperpod.MaxTieredStoragePercent)}
			}
			ts.MemoryPercent = *p
		}
		if on {
			if ts.MemoryPercent == 0 {
				return nil, &invalidError{fmt.Errorf("instanceMemoryAllocationPercentage: required (1 to %d) to turn tiered storage on", hyperpod.MaxTieredStoragePercent)}
			}
			ts.Mode = "Enable"
		}
		c, err = h.o.Clusters.UpdateCluster(r.Context(), c.Name, hyperpod.ClusterUpdate{TieredStorage: &ts})
	}
	if err != nil {
		return nil, err
	}
	for _, a := range addonsOf(c) {
		if a.Name == addon {
			return a, nil
		}
	}
	return nil, fmt.Errorf("add-on %s vanished", addon)
}

// InstanceTypeView is one instance type a cluster's group can have, with
// what the console's cluster wizard shows and offers for it.
type InstanceTypeView struct {
	Name           string  `json:"name"`
	GPU            string  `json:"gpu,omitempty"`
	GPUCount       int     `json:"gpuCount"`
	VCPU           int     `json:"vcpu"`
	MemoryGiB      int     `json:"memoryGiB"`
	PricePerHour   float64 `json:"pricePerHour"`
	TrainingPlan   bool    `json:"trainingPlan,omitempty"`
	LocalStorageGB int     `json:"localStorageGB,omitempty"`
	// MIGLayouts are the nvidia.com/mig.config layouts its GPUs take
	// (all-<profile> and all-balanced); none for a GPU without MIG.
	MIGLayouts []string `json:"migLayouts,omitempty"`
}

// instanceTypes serves GET …/instancetypes: the catalog's instance types.
func (h *Handler) instanceTypes(*http.Request) (any, error) {
	out := List[InstanceTypeView]{Items: []InstanceTypeView{}}
	for _, n := range h.o.Catalog.InstanceTypeNames() {
		it, err := h.o.Catalog.InstanceType(n)
		if err != nil {
			return nil, err
		}
		v := InstanceTypeView{Name: it.Name, GPU: it.GPU, GPUCount: it.GPUCount, VCPU: it.VCPU, MemoryGiB: it.MemoryGiB,
			PricePerHour: it.PricePerHour, TrainingPlan: it.TrainingPlan, LocalStorageGB: it.LocalStorageGB}
		if g, err := h.o.Catalog.GPU(it.Device()); err == nil && len(g.MIGProfiles) > 0 {
			for _, p := range g.MIGProfiles {
				v.MIGLayouts = append(v.MIGLayouts, "all-"+p.Name)
			}
			if _, err := g.Layout(catalog.LayoutBalanced); err == nil {
				v.MIGLayouts = append(v.MIGLayouts, catalog.LayoutBalanced)
			}
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}
