package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

// A cluster's add-ons through capstan's node API and the SageMaker API
// alike: TieredStorageConfig from CreateCluster shows as the tiered-storage
// add-on and back in DescribeCluster; turning the node autoscaler on needs
// a cluster role (field error) and goes through UpdateCluster (so only an
// InService cluster takes it: 409 otherwise; DescribeCluster's AutoScaling
// says so after); observability turns off at once in any status; bad
// input names its field and changes nothing.
func TestClusterAddons(t *testing.T) {
	h := startHarness(t, clusterConfig())
	ctx := context.Background()
	dev := h.srv.Clock.(*clock.Dev)
	_, err := h.sm.CreateCluster(ctx, &sm.CreateClusterInput{ClusterName: aws.String("addons"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{hpGroup("g5", "ml.g5.8xlarge", 1, "")},
		TieredStorageConfig: &smtypes.ClusterTieredStorageConfig{Mode: smtypes.ClusterConfigModeEnable,
			InstanceMemoryAllocationPercentage: aws.Int32(20)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Advance(hpLaunch + time.Second); err != nil {
		t.Fatal(err)
	}
	d := h.waitCluster(t, "addons", smtypes.ClusterStatusInservice)
	if ts := d.TieredStorageConfig; ts == nil || ts.Mode != smtypes.ClusterConfigModeEnable || aws.ToInt32(ts.InstanceMemoryAllocationPercentage) != 20 {
		t.Fatalf("DescribeCluster TieredStorageConfig = %+v", ts)
	}

	path := nodeapi.CapstanPath + "clusters/addons/addons"
	list := func() map[string]nodeapi.Addon {
		t.Helper()
		resp, body := h.call(t, "GET", path, "", "")
		var l nodeapi.List[nodeapi.Addon]
		if err := json.Unmarshal([]byte(body), &l); err != nil || resp.StatusCode != 200 || len(l.Items) != 3 {
			t.Fatalf("GET addons: HTTP %d %s", resp.StatusCode, body)
		}
		out := map[string]nodeapi.Addon{}
		for _, a := range l.Items {
			out[a.Name] = a
		}
		return out
	}
	got := list()
	if !got["tiered-storage"].Enabled || got["tiered-storage"].InstanceMemoryAllocationPercentage != 20 ||
		got["karpenter"].Enabled || !got["observability"].Enabled {
		t.Fatalf("add-ons after create: %+v", got)
	}

	for _, tc := range []struct {
		name, addon, body string
		code              int
		want              string
	}{
		{"unknown add-on", "dns", `{"enabled":true}`, 404, "the add-ons are karpenter, observability, tiered-storage"},
		{"no enabled", "observability", `{}`, 422, "enabled: required"},
		{"unknown field", "observability", `{"enabled":true,"color":"red"}`, 400, "unknown field"},
		{"percent out of range", "tiered-storage", `{"enabled":true,"instanceMemoryAllocationPercentage":101}`, 422, "instanceMemoryAllocationPercentage: 101 must be 1 to 100"},
		{"percent on another add-on", "observability", `{"enabled":true,"instanceMemoryAllocationPercentage":5}`, 422, "only the tiered-storage add-on"},
		{"karpenter without a role", "karpenter", `{"enabled":true}`, 422, "clusterRole: required"},
		{"karpenter with a bad role", "karpenter", `{"enabled":true,"clusterRole":"not-an-arn"}`, 422, "ClusterRole"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.call(t, "PUT", path+"/"+tc.addon, "", tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("HTTP %d %s, want %d containing %q", resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
	if after := list(); after["karpenter"].Enabled || !after["tiered-storage"].Enabled {
		t.Fatalf("refused changes changed the add-ons: %+v", after)
	}

	// Observability off at once; the node autoscaler on through UpdateCluster.
	put := func(addon, body string) nodeapi.Addon {
		t.Helper()
		resp, out := h.call(t, "PUT", path+"/"+addon, "", body)
		var a nodeapi.Addon
		if err := json.Unmarshal([]byte(out), &a); err != nil || resp.StatusCode != 200 || a.Name != addon {
			t.Fatalf("PUT %s %s: HTTP %d %s", addon, body, resp.StatusCode, out)
		}
		return a
	}
	if a := put("observability", `{"enabled":false}`); a.Enabled {
		t.Errorf("observability after off: %+v", a)
	}
	if a := put("karpenter", `{"enabled":true,"clusterRole":"`+hpRole+`"}`); !a.Enabled {
		t.Errorf("karpenter after on: %+v", a)
	}
	d = h.waitCluster(t, "addons", smtypes.ClusterStatusInservice)
	if d.AutoScaling == nil || d.AutoScaling.Mode != smtypes.ClusterAutoScalingModeEnable || aws.ToString(d.ClusterRole) != hpRole {
		t.Errorf("DescribeCluster AutoScaling %+v, role %q", d.AutoScaling, aws.ToString(d.ClusterRole))
	}
	put("tiered-storage", `{"enabled":false}`)
	h.waitCluster(t, "addons", smtypes.ClusterStatusInservice)
	if got := list(); got["tiered-storage"].Enabled || got["observability"].Enabled || !got["karpenter"].Enabled {
		t.Errorf("add-ons at the end: %+v", got)
	}
	if ts := h.describeCluster(t, "addons").TieredStorageConfig; ts == nil || ts.Mode != smtypes.ClusterConfigModeDisable {
		t.Errorf("DescribeCluster TieredStorageConfig after off: %+v", ts)
	}

	// A cluster still Creating takes no UpdateCluster (409), but its
	// observability turns off at once.
	if err := h.createCluster("young", "", hpGroup("g5", "ml.g5.8xlarge", 1, "")); err != nil {
		t.Fatal(err)
	}
	young := nodeapi.CapstanPath + "clusters/young/addons/"
	if resp, body := h.call(t, "PUT", young+"tiered-storage", "", `{"enabled":true,"instanceMemoryAllocationPercentage":10}`); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(body, "Creating") {
		t.Errorf("tiered storage while Creating: HTTP %d %s, want 409", resp.StatusCode, body)
	}
	if resp, body := h.call(t, "PUT", young+"observability", "", `{"enabled":false}`); resp.StatusCode != 200 {
		t.Errorf("observability while Creating: HTTP %d %s", resp.StatusCode, body)
	}

	// The wizard's instance types: prices and MIG layouts.
	resp, body := h.call(t, "GET", nodeapi.CapstanPath+"instancetypes", "", "")
	var its nodeapi.List[nodeapi.InstanceTypeView]
	if err := json.Unmarshal([]byte(body), &its); err != nil || resp.StatusCode != 200 {
		t.Fatalf("instancetypes: HTTP %d %s", resp.StatusCode, body)
	}
	var p5 *nodeapi.InstanceTypeView
	for i := range its.Items {
		if its.Items[i].Name == "ml.p5.48xlarge" {
			p5 = &its.Items[i]
		}
	}
	if p5 == nil || p5.GPUCount != 8 || p5.PricePerHour <= 0 || !strings.Contains(strings.Join(p5.MIGLayouts, ","), "all-1g.10gb") {
		t.Errorf("ml.p5.48xlarge: %+v", p5)
	}
}
