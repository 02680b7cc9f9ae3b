package sagemaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// calls records that a cluster operation reached the service. It is only
// used to assert that refused requests never do: the service is package
// hyperpod's.
type calls struct{ got []string }

var errRecorded = errors.New("recorded")

func (c *calls) CreateCluster(context.Context, hyperpod.ClusterSpec) (hyperpod.Cluster, error) {
	c.got = append(c.got, "CreateCluster")
	return hyperpod.Cluster{}, errRecorded
}
func (c *calls) Cluster(context.Context, string) (hyperpod.Cluster, []hyperpod.GroupView, error) {
	c.got = append(c.got, "Cluster")
	return hyperpod.Cluster{}, nil, errRecorded
}
func (c *calls) Clusters(context.Context) ([]hyperpod.Cluster, error) {
	c.got = append(c.got, "Clusters")
	return nil, errRecorded
}
func (c *calls) UpdateCluster(context.Context, string, hyperpod.ClusterUpdate) (hyperpod.Cluster, error) {
	c.got = append(c.got, "UpdateCluster")
	return hyperpod.Cluster{}, errRecorded
}
func (c *calls) DeleteCluster(context.Context, string) (hyperpod.Cluster, error) {
	c.got = append(c.got, "DeleteCluster")
	return hyperpod.Cluster{}, errRecorded
}
func (c *calls) Nodes(context.Context, string) ([]hyperpod.Node, error) {
	c.got = append(c.got, "Nodes")
	return nil, errRecorded
}
func (c *calls) Node(context.Context, string, string) (hyperpod.Node, error) {
	c.got = append(c.got, "Node")
	return hyperpod.Node{}, errRecorded
}
func (c *calls) AddNodes(context.Context, string, string, int, string) ([]hyperpod.Node, error) {
	c.got = append(c.got, "AddNodes")
	return nil, errRecorded
}
func (c *calls) DeleteNodes(context.Context, string, []string, string) ([]string, []hyperpod.NodeError, error) {
	c.got = append(c.got, "DeleteNodes")
	return nil, nil, errRecorded
}
func (c *calls) ARN(hyperpod.Cluster) string { return "" }

// newClustersAPI serves the control API with clusters as its cluster
// service (nil: the operations are disabled).
func newClustersAPI(t *testing.T, clusters Clusters) string {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cat := catalog.Default()
	svc := endpoint.NewService(st, fleet.New(fleet.Default(cat)), cat, clk, nil)
	srv := httptest.NewServer(NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat,
		Clusters: clusters, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const (
	role    = "arn:aws:iam::123456789012:role/hyperpod"
	planArn = "arn:aws:sagemaker:eu-west-1:123456789012:training-plan/P5-Week"
)

// group is a valid instance group with the members in extra added or
// replaced.
func group(extra string) string {
	g := `"InstanceGroupName":"workers","InstanceType":"ml.g5.xlarge","InstanceCount":2,"ExecutionRole":"` + role + `"`
	if extra != "" {
		g += "," + extra
	}
	return "{" + g + "}"
}

func TestClusterValidation(t *testing.T) {
	tooMany := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	tests := []struct {
		name, op, body string
		code, want     string
	}{
		{"create: name missing", "CreateCluster", `{"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value null at 'clusterName' failed to satisfy constraint: Member must not be null"},
		{"create: name pattern", "CreateCluster", `{"ClusterName":"my_cluster","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value 'my_cluster' at 'clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"},
		{"create: name too long", "CreateCluster", `{"ClusterName":"` + strings.Repeat("a", 64) + `","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "at 'clusterName' failed to satisfy constraint: Member must have length less than or equal to 63"},
		{"create: empty name", "CreateCluster", `{"ClusterName":"","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "at 'clusterName' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"create: no groups", "CreateCluster", `{"ClusterName":"c"}`,
			"ValidationException", "Value null at 'instanceGroups'"},
		{"create: empty groups", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[]}`,
			"ValidationException", "Value '[0 items]' at 'instanceGroups' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"create: too many groups", "CreateCluster", `{"ClusterName":"c","InstanceGroups":` + tooMany(101, group("")) + `}`,
			"ValidationException", "Value '[101 items]' at 'instanceGroups' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"create: count too high", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceCount":6759`) + `]}`,
			"ValidationException", "Value '6759' at 'instanceGroups.1.member.instanceCount' failed to satisfy constraint: Member must have value less than or equal to 6758"},
		{"create: count negative", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceCount":-1`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.instanceCount' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"create: min over count", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"MinInstanceCount":3`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.minInstanceCount'"},
		{"create: group name pattern", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceGroupName":"-w"`) + `]}`,
			"ValidationException", "Value '-w' at 'instanceGroups.1.member.instanceGroupName' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"create: duplicate group", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group("") + `,` + group("") + `]}`,
			"ValidationException", "at 'instanceGroups.2.member.instanceGroupName' failed to satisfy constraint: Member must be unique"},
		{"create: threads per core", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"ThreadsPerCore":3`) + `]}`,
			"ValidationException", "Value '3' at 'instanceGroups.1.member.threadsPerCore' failed to satisfy constraint: Member must have value less than or equal to 2"},
		{"create: execution role missing", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[{"InstanceGroupName":"w","InstanceType":"ml.g5.xlarge","InstanceCount":1}]}`,
			"ValidationException", "Value null at 'instanceGroups.1.member.executionRole'"},
		{"create: execution role pattern", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"ExecutionRole":"arn:aws:iam::123:role/x-long-enough"`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.executionRole' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"create: instance type missing", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[{"InstanceGroupName":"w","InstanceCount":1,"ExecutionRole":"` + role + `"}]}`,
			"ValidationException", "Value null at 'instanceGroups.1.member.instanceType'"},
		{"create: instance requirements", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceRequirements":{"InstanceTypes":["ml.g5.xlarge"]}`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.instanceRequirements' failed to satisfy constraint: Flexible instance requirements are not supported"},
		{"create: plan arn", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"TrainingPlanArn":"arn:aws:sagemaker:eu-west-1:123456789012:endpoint/some-endpoint-name"`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.trainingPlanArn' failed to satisfy constraint: Member must satisfy regular expression pattern: ^arn:aws[a-z\\-]*:sagemaker:[a-z0-9\\-]*:[0-9]{12}:training-plan/.*"},
		{"create: plan arn short", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"TrainingPlanArn":"arn:aws:sagemaker:x"`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.trainingPlanArn' failed to satisfy constraint: Member must have length between 50 and 2048"},
		{"create: spot on a plan", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"TrainingPlanArn":"`+planArn+`","CapacityRequirements":{"Spot":{}}`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.capacityRequirements.spot'"},
		{"create: spot and on-demand", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"CapacityRequirements":{"Spot":{},"OnDemand":{}}`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.capacityRequirements' failed to satisfy constraint: Member must set exactly one of Spot and OnDemand"},
		{"create: life cycle uri", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"LifeCycleConfig":{"SourceS3Uri":"ftp://x","OnCreate":"on_create.sh"}`) + `]}`,
			"ValidationException", "Value 'ftp://x' at 'instanceGroups.1.member.lifeCycleConfig.sourceS3Uri'"},
		{"create: node recovery", "CreateCluster", `{"ClusterName":"c","NodeRecovery":"Manual","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value 'Manual' at 'nodeRecovery' failed to satisfy constraint: Member must satisfy enum value set: [Automatic, None]"},
		{"create: autoscaling mode", "CreateCluster", `{"ClusterName":"c","AutoScaling":{"Mode":"On"},"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value 'On' at 'autoScaling.mode' failed to satisfy constraint: Member must satisfy enum value set: [Enable, Disable]"},
		{"create: autoscaling mode missing", "CreateCluster", `{"ClusterName":"c","AutoScaling":{"AutoScalerType":"Karpenter"},"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value null at 'autoScaling.mode'"},
		{"create: autoscaler type", "CreateCluster", `{"ClusterName":"c","AutoScaling":{"Mode":"Enable","AutoScalerType":"ClusterAutoscaler"},"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value 'ClusterAutoscaler' at 'autoScaling.autoScalerType' failed to satisfy constraint: Member must satisfy enum value set: [Karpenter]"},
		{"create: cluster role", "CreateCluster", `{"ClusterName":"c","ClusterRole":"not-a-role-arn-at-all","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "at 'clusterRole' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"create: eks arn", "CreateCluster", `{"ClusterName":"c","Orchestrator":{"Eks":{"ClusterArn":"arn:aws:eks:eu-west-1:123456789012:nodegroup/x"}},"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "at 'orchestrator.eks.clusterArn' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"create: eks arn missing", "CreateCluster", `{"ClusterName":"c","Orchestrator":{"Eks":{}},"InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "Value null at 'orchestrator.eks.clusterArn'"},
		{"create: too many tags", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group("") + `],"Tags":` + tooMany(51, `{"Key":"k","Value":"v"}`) + `}`,
			"ValidationException", "Value '[51 items]' at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"create: tag key", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group("") + `],"Tags":[{"Key":"","Value":"v"}]}`,
			"ValidationException", "at 'tags.1.member.key' failed to satisfy constraint: Member must have length between 1 and 128"},
		{"create: restricted groups", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group("") + `],"RestrictedInstanceGroups":[{}]}`,
			"ValidationException", "at 'restrictedInstanceGroups' failed to satisfy constraint: Restricted instance groups"},
		{"create: two errors", "CreateCluster", `{"ClusterName":"c_1","NodeRecovery":"x","InstanceGroups":[` + group("") + `]}`,
			"ValidationException", "2 validation errors detected: Value 'c_1' at 'clusterName'"},
		{"create: mistyped", "CreateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceCount":"two"`) + `]}`,
			"SerializationException", "Could not parse the request body"},

		{"update: name or arn", "UpdateCluster", `{"ClusterName":"arn:aws:sagemaker:eu-west-1:123456789012:cluster/ABC"}`,
			"ValidationException", "at 'clusterName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^(arn:aws"},
		{"update: groups to delete", "UpdateCluster", `{"ClusterName":"c","InstanceGroupsToDelete":` + tooMany(101, `"g"`) + `}`,
			"ValidationException", "Value '[101 items]' at 'instanceGroupsToDelete' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"update: group to delete name", "UpdateCluster", `{"ClusterName":"c","InstanceGroupsToDelete":["ok","bad_name"]}`,
			"ValidationException", "Value 'bad_name' at 'instanceGroupsToDelete.2.member'"},
		{"update: group count", "UpdateCluster", `{"ClusterName":"c","InstanceGroups":[` + group(`"InstanceCount":7000`) + `]}`,
			"ValidationException", "at 'instanceGroups.1.member.instanceCount'"},
		{"update: node recovery", "UpdateCluster", `{"ClusterName":"c","NodeRecovery":"automatic"}`,
			"ValidationException", "at 'nodeRecovery' failed to satisfy constraint: Member must satisfy enum value set"},

		{"describe: missing", "DescribeCluster", `{}`, "ValidationException", "Value null at 'clusterName'"},
		{"describe: arn too long", "DescribeCluster", `{"ClusterName":"` + strings.Repeat("a", 257) + `"}`,
			"ValidationException", "at 'clusterName' failed to satisfy constraint: Member must have length less than or equal to 256"},
		{"delete: bad name", "DeleteCluster", `{"ClusterName":"a--"}`, "ValidationException", "Value 'a--' at 'clusterName'"},

		{"list: max results", "ListClusters", `{"MaxResults":101}`,
			"ValidationException", "Value '101' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 100"},
		{"list: max results zero", "ListClusters", `{"MaxResults":0}`,
			"ValidationException", "Value '0' at 'maxResults' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"list: sort by endpoint key", "ListClusters", `{"SortBy":"Name"}`,
			"ValidationException", "Value 'Name' at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [CREATION_TIME, NAME]"},
		{"list: sort order", "ListClusters", `{"SortOrder":"Up"}`,
			"ValidationException", "Value 'Up' at 'sortOrder'"},
		{"list: name contains", "ListClusters", `{"NameContains":"a b"}`,
			"ValidationException", "Value 'a b' at 'nameContains'"},
		{"list: plan arn", "ListClusters", `{"TrainingPlanArn":"` + strings.Repeat("x", 60) + `"}`,
			"ValidationException", "at 'trainingPlanArn' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"list: bad token", "ListClusters", `{"NextToken":"garbage!"}`, "ValidationException", "Invalid pagination token."},

		{"nodes: cluster missing", "ListClusterNodes", `{}`, "ValidationException", "Value null at 'clusterName'"},
		{"nodes: group contains", "ListClusterNodes", `{"ClusterName":"c","InstanceGroupNameContains":"a_b"}`,
			"ValidationException", "Value 'a_b' at 'instanceGroupNameContains'"},
		{"nodes: sort by", "ListClusterNodes", `{"ClusterName":"c","SortBy":"LaunchTime"}`,
			"ValidationException", "Value 'LaunchTime' at 'sortBy'"},
		{"nodes: bad token", "ListClusterNodes", `{"ClusterName":"c","NextToken":"%%%"}`, "ValidationException", "Invalid pagination token."},

		{"node: id missing", "DescribeClusterNode", `{"ClusterName":"c"}`, "ValidationException", "Value null at 'nodeId'"},
		{"node: id pattern", "DescribeClusterNode", `{"ClusterName":"c","NodeId":"i-XYZ"}`,
			"ValidationException", "Value 'i-XYZ' at 'nodeId' failed to satisfy constraint: Member must satisfy regular expression pattern: ^i-[a-f0-9]{8}(?:[a-f0-9]{9})?"},
		{"node: logical id pattern", "DescribeClusterNode", `{"ClusterName":"c","NodeLogicalId":"-x"}`,
			"ValidationException", "Value '-x' at 'nodeLogicalId'"},

		{"add: nodes missing", "BatchAddClusterNodes", `{"ClusterName":"c"}`, "ValidationException", "Value null at 'nodesToAdd'"},
		{"add: too many specs", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":` + tooMany(6, `{"InstanceGroupName":"g","IncrementTargetCountBy":1}`) + `}`,
			"ValidationException", "Value '[6 items]' at 'nodesToAdd' failed to satisfy constraint: Member must have length less than or equal to 5"},
		{"add: increment", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":[{"InstanceGroupName":"g","IncrementTargetCountBy":51}]}`,
			"ValidationException", "Value '51' at 'nodesToAdd.1.member.incrementTargetCountBy' failed to satisfy constraint: Member must have value less than or equal to 50"},
		{"add: increment zero", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":[{"InstanceGroupName":"g","IncrementTargetCountBy":0}]}`,
			"ValidationException", "at 'nodesToAdd.1.member.incrementTargetCountBy' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{"add: total over 50", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":[{"InstanceGroupName":"a","IncrementTargetCountBy":30},{"InstanceGroupName":"b","IncrementTargetCountBy":21}]}`,
			"ValidationException", "Value '51' at 'nodesToAdd' failed to satisfy constraint: The total of IncrementTargetCountBy must be less than or equal to 50"},
		{"add: group repeated", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":[{"InstanceGroupName":"a","IncrementTargetCountBy":1},{"InstanceGroupName":"a","IncrementTargetCountBy":1}]}`,
			"ValidationException", "at 'nodesToAdd.2.member.instanceGroupName'"},
		{"add: zones", "BatchAddClusterNodes", `{"ClusterName":"c","NodesToAdd":[{"InstanceGroupName":"a","IncrementTargetCountBy":1,"AvailabilityZones":["eu-west-1a"]}]}`,
			"ValidationException", "at 'nodesToAdd.1.member' failed to satisfy constraint: Per-request availability zones"},
		{"add: client token", "BatchAddClusterNodes", `{"ClusterName":"c","ClientToken":"` + strings.Repeat("t", 65) + `","NodesToAdd":[{"InstanceGroupName":"a","IncrementTargetCountBy":1}]}`,
			"ValidationException", "at 'clientToken' failed to satisfy constraint: Member must have length less than or equal to 64"},

		{"delete nodes: none", "BatchDeleteClusterNodes", `{"ClusterName":"c"}`, "ValidationException", "Value null at 'nodeIds'"},
		{"delete nodes: empty", "BatchDeleteClusterNodes", `{"ClusterName":"c","NodeIds":[]}`,
			"ValidationException", "Value '[0 items]' at 'nodeIds'"},
		{"delete nodes: too many", "BatchDeleteClusterNodes", `{"ClusterName":"c","NodeIds":` + tooMany(101, `"i-0123456789abcdef0"`) + `}`,
			"ValidationException", "Value '[101 items]' at 'nodeIds' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"delete nodes: too many together", "BatchDeleteClusterNodes", `{"ClusterName":"c","NodeIds":` + tooMany(60, `"i-0123456789abcdef0"`) + `,"NodeLogicalIds":` + tooMany(41, `"i-0123456789abcdef0"`) + `}`,
			"ValidationException", "Value '101' at 'nodeIds' failed to satisfy constraint: NodeIds and NodeLogicalIds together must have at most 100 members"},
		{"delete nodes: id pattern", "BatchDeleteClusterNodes", `{"ClusterName":"c","NodeIds":["i-0123456789abcdef0","node-1"]}`,
			"ValidationException", "Value 'node-1' at 'nodeIds.2.member'"},
	}
	rec := &calls{}
	url := newClustersAPI(t, rec)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec.got = nil
			st, hdr, raw := call(t, url, tc.op, tc.body)
			var e struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(raw, &e)
			if st != http.StatusBadRequest || e.Type != tc.code || hdr.Get("X-Amzn-ErrorType") != tc.code {
				t.Fatalf("got %d %s, want 400 %s", st, raw, tc.code)
			}
			if !strings.Contains(e.Message, tc.want) {
				t.Fatalf("message %q\nwant it to contain %q", e.Message, tc.want)
			}
			if len(rec.got) > 0 {
				t.Fatalf("the service was called: %v", rec.got)
			}
		})
	}
}

// TestClusterValidRequestsReachService checks the other side of
// TestClusterValidation: a valid request of each operation passes
// validation (the recorder then fails it).
func TestClusterValidRequestsReachService(t *testing.T) {
	tests := []struct{ op, body, want string }{
		{"CreateCluster", `{"ClusterName":"c-1","NodeRecovery":"None","AutoScaling":{"Mode":"Enable","AutoScalerType":"Karpenter"},` +
			`"Orchestrator":{"Eks":{"ClusterArn":"arn:aws:eks:eu-west-1:123456789012:cluster/eks-1"}},"ClusterRole":"` + role + `",` +
			`"Tags":[{"Key":"team","Value":"ml"}],"VpcConfig":{"SecurityGroupIds":["sg-1"],"Subnets":["s-1"]},"InstanceGroups":[` +
			group(`"ThreadsPerCore":1,"MinInstanceCount":1,"LifeCycleConfig":{"SourceS3Uri":"s3://b/lc","OnCreate":"on_create.sh"},"CapacityRequirements":{"Spot":{}}`) + `,` +
			group(`"InstanceGroupName":"reserved","InstanceType":"ml.p5.48xlarge","TrainingPlanArn":"`+planArn+`"`) + `]}`, "CreateCluster"},
		{"UpdateCluster", `{"ClusterName":"arn:aws:sagemaker:eu-west-1:123456789012:cluster/abcdef012345","InstanceGroupsToDelete":["old"],"InstanceGroups":[` + group("") + `]}`, "UpdateCluster"},
		{"DescribeCluster", `{"ClusterName":"c-1"}`, "Cluster"},
		{"DeleteCluster", `{"ClusterName":"c-1"}`, "DeleteCluster"},
		{"ListClusters", `{"SortBy":"NAME","SortOrder":"Descending","MaxResults":100,"TrainingPlanArn":"` + planArn + `"}`, "Clusters"},
		{"ListClusterNodes", `{"ClusterName":"c-1","InstanceGroupNameContains":"work","SortBy":"CREATION_TIME"}`, "Nodes"},
		{"DescribeClusterNode", `{"ClusterName":"c-1","NodeId":"i-0123456789abcdef0"}`, "Node"},
		{"BatchAddClusterNodes", `{"ClusterName":"c-1","NodesToAdd":[{"InstanceGroupName":"a","IncrementTargetCountBy":25},{"InstanceGroupName":"b","IncrementTargetCountBy":25}]}`, "AddNodes"},
		{"BatchDeleteClusterNodes", `{"ClusterName":"c-1","NodeIds":["i-0123456789abcdef0","i-01234567"]}`, "DeleteNodes"},
	}
	rec := &calls{}
	url := newClustersAPI(t, rec)
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			rec.got = nil
			st, _, raw := call(t, url, tc.op, tc.body)
			if st != http.StatusInternalServerError || len(rec.got) != 1 || rec.got[0] != tc.want {
				t.Fatalf("got %d %s, calls %v; want the recorder's 500 after %s", st, raw, rec.got, tc.want)
			}
		})
	}
}

func TestClustersDisabled(t *testing.T) {
	url := newClustersAPI(t, nil)
	for _, op := range []string{"CreateCluster", "DescribeCluster", "ListClusters", "UpdateCluster", "DeleteCluster",
		"ListClusterNodes", "DescribeClusterNode", "BatchAddClusterNodes", "BatchDeleteClusterNodes"} {
		t.Run(op, func(t *testing.T) {
			st, _, raw := call(t, url, op, `{}`)
			if st != 400 || !strings.Contains(string(raw), "UnknownOperationException") || !strings.Contains(string(raw), "not enabled") {
				t.Fatalf("%d %s", st, raw)
			}
		})
	}
}

// TestClusterConversion checks what CreateCluster hands the service: the
// plan from the ARN's last part, spot from CapacityRequirements, the
// tiered storage, and the ignored members it warns about.
func TestClusterConversion(t *testing.T) {
	body := `{"ClusterName":"c","TieredStorageConfig":{"Mode":"Enable","InstanceMemoryAllocationPercentage":20},"NodeProvisioningMode":"Continuous","InstanceGroups":[` +
		group(`"CapacityRequirements":{"Spot":{}},"ImageId":"default","LifeCycleConfig":{"SourceS3Uri":"s3://b/lc","OnCreate":"a.sh","OnInitComplete":"b.sh"}`) + `,` +
		group(`"InstanceGroupName":"od","CapacityRequirements":{"OnDemand":{}},"InstanceStorageConfigs":[{"EbsVolumeConfig":{"VolumeSizeInGB":500}}]`) + `,` +
		group(`"InstanceGroupName":"plan","TrainingPlanArn":"`+planArn+`","ThreadsPerCore":2,"MinInstanceCount":1`) + `]}`
	var in createClusterInput
	if err := decode([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	var ve validationError
	ignored := in.common(&ve)
	if err := ve.Err(); err != nil {
		t.Fatal(err)
	}
	if ts := in.TieredStorageConfig.spec(); ts == nil || *ts != (hyperpod.TieredStorage{Mode: "Enable", MemoryPercent: 20}) {
		t.Errorf("tiered storage = %+v, want Enable at 20 %%", ts)
	}
	wantIgnored := []string{"NodeProvisioningMode", "InstanceGroups[0].LifeCycleConfig.OnInitComplete", "InstanceGroups[0].ImageId", "InstanceGroups[1].InstanceStorageConfigs"}
	if !slices.Equal(ignored, wantIgnored) {
		t.Fatalf("ignored = %v, want %v", ignored, wantIgnored)
	}
	got := groupSpecs(in.InstanceGroups)
	want := []hyperpod.InstanceGroupSpec{
		{Name: "workers", InstanceType: "ml.g5.xlarge", Count: 2, ExecutionRole: role, Spot: true,
			LifeCycle: &hyperpod.LifeCycleConfig{SourceS3URI: "s3://b/lc", OnCreate: "a.sh"}},
		{Name: "od", InstanceType: "ml.g5.xlarge", Count: 2, ExecutionRole: role},
		{Name: "plan", InstanceType: "ml.g5.xlarge", Count: 2, MinCount: 1, ExecutionRole: role, ThreadsPerCore: 2,
			Plan: placement.PlanNamed("p5-week"), PlanArn: planArn},
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("specs\n got %s\nwant %s", g, w)
	}
	if got[2].CapacityType() != hyperpod.CapacityReserved || got[0].CapacityType() != hyperpod.CapacitySpot {
		t.Fatalf("capacity types %s %s", got[0].CapacityType(), got[2].CapacityType())
	}
}

// TestWarnIgnored checks that ignored members reach the API's log.
func TestWarnIgnored(t *testing.T) {
	var buf bytes.Buffer
	a := &API{opts: Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	a.warnIgnored("CreateCluster", []string{"VpcConfig", "InstanceGroups[0].ImageId"})
	a.warnIgnored("CreateCluster", nil)
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "VpcConfig") ||
		!strings.Contains(out, "InstanceGroups[0].ImageId") {
		t.Fatalf("log: %q", out)
	}
}

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	arnFor = func(c hyperpod.Cluster) string { return "arn:aws:sagemaker:eu-west-1:123456789012:cluster/" + c.ID }
)

func sampleCluster() (hyperpod.Cluster, []hyperpod.GroupView) {
	spot := hyperpod.InstanceGroupSpec{Name: "spot-workers", InstanceType: "ml.g5.xlarge", Count: 3, MinCount: 1,
		ExecutionRole: role, ThreadsPerCore: 1, Spot: true, LifeCycle: &hyperpod.LifeCycleConfig{SourceS3URI: "s3://bucket/lc/", OnCreate: "on_create.sh"}}
	od := hyperpod.InstanceGroupSpec{Name: "controller", InstanceType: "ml.m5.xlarge", Count: 1, ExecutionRole: role}
	plan := hyperpod.InstanceGroupSpec{Name: "reserved", InstanceType: "ml.p5.48xlarge", Count: 2, ExecutionRole: role,
		Plan: placement.PlanNamed("p5-week"), PlanArn: planArn}
	c := hyperpod.Cluster{Name: "Train-1", ID: "abcdef012345", Status: hyperpod.StatusUpdating,
		Groups: []hyperpod.Group{
			{InstanceGroupSpec: spot, Target: 3, Status: hyperpod.GroupUpdating},
			{InstanceGroupSpec: od, Target: 1, Status: hyperpod.GroupInService},
			{InstanceGroupSpec: plan, Target: 2, Status: hyperpod.GroupCreating},
		},
		EksClusterArn: "arn:aws:eks:eu-west-1:123456789012:cluster/eks-1", NodeRecovery: hyperpod.RecoveryAutomatic,
		AutoScaling: hyperpod.AutoScaling{Mode: "Enable", AutoScalerType: "Karpenter"}, ClusterRole: role,
		Created: t0.Add(1500 * time.Millisecond), Updated: t0.Add(time.Hour)}
	views := make([]hyperpod.GroupView, len(c.Groups))
	for i, g := range c.Groups {
		views[i] = hyperpod.GroupView{Group: g, Current: []int{2, 1, 0}[i]}
	}
	return c, views
}

func sampleNodes() []hyperpod.Node {
	return []hyperpod.Node{
		{ID: "i-0b0000000000000a2", Cluster: "Train-1", Group: "spot-workers", InstanceType: "ml.g5.xlarge", CapacityType: hyperpod.CapacitySpot,
			Zone: "eu-west-1b", Status: hyperpod.NodeRunning, Launched: t0.Add(2 * time.Minute), Ready: t0.Add(5 * time.Minute)},
		{ID: "i-0a0000000000000ff", Cluster: "Train-1", Group: "spot-workers", InstanceType: "ml.g5.xlarge", CapacityType: hyperpod.CapacitySpot,
			Zone: "eu-west-1a", Status: hyperpod.NodePending, Launched: t0.Add(3 * time.Minute)},
		{ID: "i-0c0000000000000c3", Cluster: "Train-1", Group: "controller", InstanceType: "ml.m5.xlarge", CapacityType: hyperpod.CapacityOnDemand,
			Zone: "eu-west-1a", Status: hyperpod.NodeFailure, Message: "The instance failed its health check.", Launched: t0.Add(time.Minute)},
	}
}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	awsjsontest.Golden(t, name, raw, *update)
}

// TestClusterGolden pins the JSON the cluster operations answer with for
// given hyperpod values.
func TestClusterGolden(t *testing.T) {
	a := &API{opts: Options{Region: "eu-west-1"}}
	c, views := sampleCluster()
	other := hyperpod.Cluster{Name: "infer", ID: "0123456789ab", Status: hyperpod.StatusInService, NodeRecovery: hyperpod.RecoveryNone,
		Groups:  []hyperpod.Group{{InstanceGroupSpec: hyperpod.InstanceGroupSpec{Name: "g", InstanceType: "ml.g5.xlarge", Count: 1, ExecutionRole: role}, Target: 1, Status: hyperpod.GroupInService}},
		Created: t0}
	list, err := listClustersPage(listClustersInput{}, []hyperpod.Cluster{c, other}, arnFor)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := listNodesPage(listClusterNodesInput{}, sampleNodes())
	if err != nil {
		t.Fatal(err)
	}
	g := c.Groups[0].InstanceGroupSpec
	// A group with a layout in place, and one changing to another: its
	// node still has the old layout.
	mig := hyperpod.Cluster{Name: "mig", ID: "0123456789mg", Status: hyperpod.StatusUpdating, NodeRecovery: hyperpod.RecoveryAutomatic,
		Groups: []hyperpod.Group{
			{InstanceGroupSpec: hyperpod.InstanceGroupSpec{Name: "small", InstanceType: "ml.p5.48xlarge", Count: 1, ExecutionRole: role, MIGLayout: "all-1g.10gb"}, Target: 1, Status: hyperpod.GroupInService},
			{InstanceGroupSpec: hyperpod.InstanceGroupSpec{Name: "changing", InstanceType: "ml.p5.48xlarge", Count: 1, ExecutionRole: role, MIGLayout: "all-3g.40gb"}, Target: 1, Status: hyperpod.GroupUpdating},
		},
		Created: t0}
	migNode := hyperpod.Node{ID: "i-0d0000000000000d4", Cluster: "mig", Group: "changing", InstanceType: "ml.p5.48xlarge", CapacityType: hyperpod.CapacityOnDemand,
		Zone: "eu-west-1a", Status: hyperpod.NodeShuttingDown, Launched: t0, Ready: t0.Add(time.Minute), MIGLayout: "all-balanced"}
	tests := []struct {
		name string
		v    any
	}{
		{"cluster_describe", a.describeClusterOut(c, views, arnFor(c))},
		{"cluster_describe_minimal", a.describeClusterOut(other, []hyperpod.GroupView{{Group: other.Groups[0]}}, arnFor(other))},
		{"cluster_list", list},
		{"cluster_list_nodes", nodes},
		{"cluster_describe_node", map[string]nodeDetails{"NodeDetails": nodeDetailsOut(sampleNodes()[0], &g, "eu-west-1")}},
		{"cluster_describe_mig", a.describeClusterOut(mig, []hyperpod.GroupView{{Group: mig.Groups[0], Current: 1}, {Group: mig.Groups[1], LayoutPending: 1}}, arnFor(mig))},
		{"cluster_describe_node_mig", map[string]nodeDetails{"NodeDetails": nodeDetailsOut(migNode, &mig.Groups[1].InstanceGroupSpec, "eu-west-1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.name, tc.v) })
	}
}

func TestListClustersPage(t *testing.T) {
	mk := func(name, id string, at time.Duration, plan string) hyperpod.Cluster {
		c := hyperpod.Cluster{Name: name, ID: id, Status: hyperpod.StatusInService, Created: t0.Add(at)}
		if plan != "" {
			c.Groups = []hyperpod.Group{{InstanceGroupSpec: hyperpod.InstanceGroupSpec{Name: "g", Plan: placement.PlanNamed(plan),
				PlanArn: "arn:aws:sagemaker:eu-west-1:123456789012:training-plan/" + plan}}}
		}
		return c
	}
	// Given out of order: the wire sorts.
	cs := []hyperpod.Cluster{mk("c", "000000000003", 3*time.Second, ""), mk("a", "000000000001", time.Second, "P5-Week"),
		mk("b", "000000000002", 2*time.Second, ""), mk("d", "000000000004", 2*time.Second, "other")}
	ep := func(d time.Duration) *Epoch { return &Epoch{Time: t0.Add(d)} }
	tests := []struct {
		name string
		in   listClustersInput
		want [][]string
	}{
		{"default: creation time ascending, ties by name", listClustersInput{MaxResults: ptr(2)}, [][]string{{"a", "b"}, {"d", "c"}}},
		{"name descending", listClustersInput{SortBy: "NAME", SortOrder: "Descending"}, [][]string{{"d", "c", "b", "a"}}},
		{"created after", listClustersInput{CreationTimeAfter: ep(time.Second)}, [][]string{{"b", "d", "c"}}},
		{"created before", listClustersInput{CreationTimeBefore: ep(2 * time.Second)}, [][]string{{"a"}}},
		{"name contains any case", listClustersInput{NameContains: "C"}, [][]string{{"c"}}},
		{"training plan, any case", listClustersInput{TrainingPlanArn: "arn:aws:sagemaker:eu-west-1:123456789012:training-plan/p5-week"}, [][]string{{"a"}}},
		{"nothing", listClustersInput{NameContains: "zzz"}, [][]string{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			for i, page := range tc.want {
				out, err := listClustersPage(in, cs, arnFor)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, s := range out.ClusterSummaries {
					got = append(got, s.ClusterName)
				}
				if fmt.Sprint(got) != fmt.Sprint(page) && !(len(got) == 0 && len(page) == 0) {
					t.Fatalf("page %d = %v, want %v", i, got, page)
				}
				if (out.NextToken != "") != (i < len(tc.want)-1) {
					t.Fatalf("page %d NextToken %q", i, out.NextToken)
				}
				in.NextToken = out.NextToken
			}
		})
	}
	if _, err := listClustersPage(listClustersInput{NextToken: "eyJvIjo5OX0"}, cs, arnFor); err == nil {
		t.Fatal("a token past the end was accepted")
	}
}

func TestListNodesPage(t *testing.T) {
	ep := func(d time.Duration) *Epoch { return &Epoch{Time: t0.Add(d)} }
	tests := []struct {
		name string
		in   listClusterNodesInput
		want []string
	}{
		{"default: launch ascending", listClusterNodesInput{}, []string{"i-0c0000000000000c3", "i-0b0000000000000a2", "i-0a0000000000000ff"}},
		{"name ascending", listClusterNodesInput{SortBy: "NAME"}, []string{"i-0a0000000000000ff", "i-0b0000000000000a2", "i-0c0000000000000c3"}},
		{"launch descending", listClusterNodesInput{SortOrder: "Descending"}, []string{"i-0a0000000000000ff", "i-0b0000000000000a2", "i-0c0000000000000c3"}},
		{"group contains", listClusterNodesInput{InstanceGroupNameContains: ptr("CONTROL")}, []string{"i-0c0000000000000c3"}},
		{"launched after", listClusterNodesInput{CreationTimeAfter: ep(time.Minute)}, []string{"i-0b0000000000000a2", "i-0a0000000000000ff"}},
		{"launched before", listClusterNodesInput{CreationTimeBefore: ep(3 * time.Minute)}, []string{"i-0c0000000000000c3", "i-0b0000000000000a2"}},
		{"one per page", listClusterNodesInput{MaxResults: ptr(1)}, []string{"i-0c0000000000000c3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := listNodesPage(tc.in, sampleNodes())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range out.ClusterNodeSummaries {
				got = append(got, s.InstanceId)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if (out.NextToken != "") != (tc.in.MaxResults != nil) {
				t.Fatalf("NextToken %q", out.NextToken)
			}
		})
	}
}

func TestClusterErrors(t *testing.T) {
	a := &API{opts: Options{Region: "eu-west-1", AccountID: "123456789012"}}
	tests := []struct {
		name       string
		err        error
		code, want string
	}{
		{"cluster not found", fmt.Errorf("describe: %w", &hyperpod.NotFoundError{Kind: "cluster", Name: "c1"}), CodeNotFound, "Cluster with name c1 not found."},
		{"group not found", &hyperpod.NotFoundError{Kind: "instance group", Name: "g"}, CodeNotFound, "Instance group with name g not found."},
		{"node not found", &hyperpod.NotFoundError{Kind: "node", Name: "i-0123456789abcdef0"}, CodeNotFound, "Node with id i-0123456789abcdef0 not found."},
		{"exists", &hyperpod.ExistsError{Name: "c1"}, CodeInUse, "Cluster with name c1 already exists."},
		{"conflict", &hyperpod.ConflictError{Name: "c1", Message: "Cluster c1 is being deleted."}, CodeConflict, "Cluster c1 is being deleted."},
		{"field", &hyperpod.FieldError{Field: "InstanceGroups[1].TrainingPlanArn", Message: "the plan targets endpoint, not hyperpod-cluster"}, CodeValidation,
			"1 validation error detected: Value at 'InstanceGroups[1].TrainingPlanArn' failed to satisfy constraint: the plan targets endpoint, not hyperpod-cluster"},
		{"fleet limit", &hyperpod.CapacityError{Group: "w", Err: &fleet.LimitError{InstanceType: "ml.g5.xlarge", Requested: 10, Available: 4, Total: 8}}, CodeLimitExceeded,
			"The account-level service limit 'ml.g5.xlarge for cluster usage' is 8 Instances, of which 4 are available to this cluster; instance group w would hold 10."},
		{"plan limit", &hyperpod.CapacityError{Group: "r", Err: &placement.LimitError{Name: "P5-Week", Requested: 3, Available: 2, Total: 4}}, CodeLimitExceeded,
			"Instance group r: training plan P5-Week has 4 instances (2 available to this cluster); 3 were requested."},
		{"plan missing", &hyperpod.CapacityError{Group: "r", Err: &placement.LimitError{Name: "nope"}}, CodeValidation,
			"Instance group r: training plan nope does not exist or has expired."},
		{"other capacity", &hyperpod.CapacityError{Group: "r", Err: errors.New("no zone")}, CodeLimitExceeded, "instance group r: no zone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			we := a.toWire(tc.err)
			if we == nil || we.Code != tc.code || we.Status != 400 || !strings.Contains(we.Message, tc.want) {
				t.Fatalf("got %+v, want 400 %s %q", we, tc.code, tc.want)
			}
		})
	}
}

func TestBatchCodes(t *testing.T) {
	a := &API{opts: Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	addTests := []struct {
		err  error
		code string
		ok   bool
	}{
		{&hyperpod.NotFoundError{Kind: "instance group", Name: "g"}, "InstanceGroupNotFound", true},
		{fmt.Errorf("add: %w", &hyperpod.ConflictError{Message: "deleting"}), "InvalidInstanceGroupStatus", true},
		{&hyperpod.NotFoundError{Kind: "cluster", Name: "c"}, "", false},
		{&hyperpod.CapacityError{Group: "g", Err: errors.New("full")}, "", false},
	}
	for _, tc := range addTests {
		if code, ok := a.addNodesFailure(tc.err); code != tc.code || ok != tc.ok {
			t.Errorf("addNodesFailure(%v) = %q %v, want %q %v", tc.err, code, ok, tc.code, tc.ok)
		}
	}
	for in, want := range map[hyperpod.NodeErrorReason]string{hyperpod.NodeNotFound: "NodeIdNotFound", hyperpod.NodeNotDeletable: "InvalidNodeStatus"} {
		if got := nodeErrorCode(in); got != want {
			t.Errorf("nodeErrorCode(%d) = %q, want %q", in, got, want)
		}
	}
	if got := a.wireMessage(errors.New("secret internals")); got != "An internal error occurred." {
		t.Errorf("wireMessage leaks: %q", got)
	}
}

func TestNodeAddress(t *testing.T) {
	for id, want := range map[string]string{"i-0123456789abcdef0": "10.188.222.240", "i-0b0000000000000a2": "10.0.0.162", "i-01234567": "10.35.69.103"} {
		if got := nodeAddress(id); got != want {
			t.Errorf("nodeAddress(%s) = %s, want %s", id, got, want)
		}
	}
}

// TestTrainingPlanStatus checks that a reserved group shows its plan's
// status from the capacity calendar.
func TestTrainingPlanStatus(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(t0)
	cat := catalog.Default()
	cal, err := capacity.New(st, cat, clk, fleet.Default(cat))
	if err != nil {
		t.Fatal(err)
	}
	offers, err := cal.Search(capacity.Query{InstanceType: "ml.p5.48xlarge", Count: 1, Duration: 24 * time.Hour,
		TargetResources: []string{"hyperpod-cluster"}, StartAfter: t0.Add(48 * time.Hour)})
	if err != nil || len(offers) == 0 {
		t.Fatalf("search: %v %v", offers, err)
	}
	if _, err := cal.CreatePlan("P5-Week", offers[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	a := &API{opts: Options{Capacity: cal}}
	c, views := sampleCluster()
	out := a.describeClusterOut(c, views, arnFor(c))
	if got := out.InstanceGroups[2].TrainingPlanStatus; got != capacity.StatusScheduled {
		t.Fatalf("TrainingPlanStatus = %q, want %q", got, capacity.StatusScheduled)
	}
	if got := out.InstanceGroups[0].TrainingPlanStatus; got != "" {
		t.Fatalf("a spot group has TrainingPlanStatus %q", got)
	}
}
