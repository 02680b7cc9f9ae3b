package sagemaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/placement"
)

// Clusters is what the HyperPod cluster operations need of the cluster
// service (package hyperpod's). nameOrArn and cluster take a cluster's name
// or its ARN (arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID), as every
// cluster operation's ClusterName member does.
type Clusters interface {
	CreateCluster(ctx context.Context, spec hyperpod.ClusterSpec) (hyperpod.Cluster, error)
	Cluster(ctx context.Context, nameOrArn string) (hyperpod.Cluster, []hyperpod.GroupView, error)
	Clusters(ctx context.Context) ([]hyperpod.Cluster, error)
	UpdateCluster(ctx context.Context, nameOrArn string, u hyperpod.ClusterUpdate) (hyperpod.Cluster, error)
	DeleteCluster(ctx context.Context, nameOrArn string) (hyperpod.Cluster, error)
	Nodes(ctx context.Context, cluster string) ([]hyperpod.Node, error)
	Node(ctx context.Context, cluster, nodeID string) (hyperpod.Node, error)
	AddNodes(ctx context.Context, cluster, group string, n int, reason string) ([]hyperpod.Node, error)
	DeleteNodes(ctx context.Context, cluster string, ids []string, reason string) (deleted []string, failed []hyperpod.NodeError, err error)
	ARN(c hyperpod.Cluster) string
}

// Request members capstan accepts and keeps nowhere: they configure the
// real service's networking, storage, images, health checks and Slurm, none
// of which a simulated node has. A request that sets one is served, and the
// API logger warns naming each (warnIgnored), so a user who relies on one
// learns it did nothing:
//
//   - CreateCluster: VpcConfig, Orchestrator.Slurm
//   - CreateCluster and UpdateCluster: NodeProvisioningMode, and in
//     InstanceGroups[]: InstanceStorageConfigs, OnStartDeepHealthChecks, OverrideVpcConfig, ScheduledUpdateConfig,
//     ImageId, SlurmConfig, NetworkInterface,
//     LifeCycleConfig.OnInitComplete, and KubernetesConfig but for its
//     nvidia.com/mig.config label (Taints and every other label are
//     ignored, each named in the warning)
//   - UpdateCluster: Orchestrator (the EKS cluster is fixed at creation)
//   - ListClusterNodes: IncludeNodeLogicalIds (a node's logical id is its
//     instance id)
//
// Refused instead (ValidationException), because ignoring them would change
// what the cluster is: RestrictedInstanceGroups (training-only groups),
// InstanceGroups[].InstanceRequirements (flexible instance types; capstan
// needs InstanceType), and BatchAddClusterNodes' per-group AvailabilityZones
// and InstanceTypes.

// Patterns and ARN shapes from the SageMaker model.
var (
	patClusterNameOrArn = regexp.MustCompile(`^(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}|[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})$`)
	// Role ARNs also take the account placeholder the HyperPod documentation
	// prints (XXXXXXXXXXXX), so its commands run as published.
	patRoleArn         = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::(\d{12}|X{12}):role/?[a-zA-Z_0-9+=,.@\-_/]+$`)
	patTrainingPlanArn = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*$`)
	patEksClusterArn   = regexp.MustCompile(`^arn:aws[a-z\-]*:eks:[a-z0-9\-]*:[0-9]{12}:cluster\/[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
	patS3Uri           = regexp.MustCompile(`^(https|s3)://([^/]+)/?(.*)$`)
	patClusterNodeID   = regexp.MustCompile(`^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$`)
	patNodeLogicalID   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9]$`)
)

const (
	patClusterNameOrArnText = `^(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12})|([a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})`
	patRoleArnText          = `^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+`
	patTrainingPlanArnText  = `^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*`
	patEksClusterArnText    = `^arn:aws[a-z\-]*:eks:[a-z0-9\-]*:[0-9]{12}:cluster\/[0-9A-Za-z][A-Za-z0-9\-_]{0,99}`
	patS3UriText            = `^(https|s3)://([^/]+)/?(.*)`
	patClusterNodeIDText    = `^i-[a-f0-9]{8}(?:[a-f0-9]{9})?`
	patNodeLogicalIDText    = `^[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9]`
)

// Wire limits the hyperpod package has no constant for.
const (
	maxNodesToAdd          = 5  // AddClusterNodeSpecificationList
	maxIncrementPerRequest = 50 // IncrementTargetCountBy, each and in total
)

// clusterSortKeys is ClusterSortBy (upper case, unlike the endpoint lists').
var clusterSortKeys = []string{"CREATION_TIME", "NAME"}

func (a *API) clusters() (Clusters, error) {
	if a.opts.Clusters == nil {
		return nil, awsjson.Errorf(http.StatusBadRequest, CodeUnknownOperation, "HyperPod clusters are not enabled on this server.")
	}
	return a.opts.Clusters, nil
}

// clusterRequest is the start of every cluster operation: the service (or
// the error saying clusters are off) and the decoded input.
func clusterRequest[T any](a *API, body []byte) (Clusters, *T, error) {
	svc, err := a.clusters()
	if err != nil {
		return nil, nil, err
	}
	in := new(T)
	if err := decode(body, in); err != nil {
		return nil, nil, err
	}
	return svc, in, nil
}

// warnIgnored logs the members of a request capstan accepts but does not
// act on (listed at the top of this file).
func (a *API) warnIgnored(op string, members []string) {
	if len(members) > 0 {
		a.opts.Logger.Warn("request members accepted but not acted on by capstan", "op", op, "members", members)
	}
}

// set reports whether a raw member was sent (and is not null).
func set(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// --- validation helpers -----------------------------------------------------

// clusterRef checks a required ClusterNameOrArn member.
func (e *validationError) clusterRef(v *string, path string) {
	if !e.Required(v != nil, path) {
		return
	}
	switch {
	case len(*v) > 256:
		e.Add(*v, path, "Member must have length less than or equal to 256")
	case !patClusterNameOrArn.MatchString(*v):
		e.Add(*v, path, "Member must satisfy regular expression pattern: "+patClusterNameOrArnText)
	}
}

// arnMember checks an optional string member against [lo, hi] and a pattern.
func (e *validationError) arnMember(v string, lo, hi int, path string, pat *regexp.Regexp, patText string) {
	if v == "" {
		return
	}
	switch {
	case len(v) < lo || len(v) > hi:
		e.Add(v, path, fmt.Sprintf("Member must have length between %d and %d", lo, hi))
	case !pat.MatchString(v):
		e.Add(v, path, "Member must satisfy regular expression pattern: "+patText)
	}
}

// groupName checks a required instance group name (1..63, the resource
// name pattern).
func (e *validationError) groupName(v *string, path string) {
	if v != nil && *v == "" {
		e.Add(*v, path, "Member must have length greater than or equal to 1")
		return
	}
	e.name(v, path, patResourceName, patResourceNameText)
}

// --- inputs -----------------------------------------------------------------

type lifeCycleInput struct {
	SourceS3Uri    string          `json:"SourceS3Uri"`
	OnCreate       *string         `json:"OnCreate"`
	OnInitComplete json.RawMessage `json:"OnInitComplete"`
}

type capacityRequirements struct {
	Spot     json.RawMessage `json:"Spot,omitempty"`
	OnDemand json.RawMessage `json:"OnDemand,omitempty"`
}

type instanceGroupInput struct {
	InstanceCount        *int                  `json:"InstanceCount"`
	MinInstanceCount     *int                  `json:"MinInstanceCount"`
	InstanceGroupName    *string               `json:"InstanceGroupName"`
	InstanceType         *string               `json:"InstanceType"`
	ExecutionRole        *string               `json:"ExecutionRole"`
	ThreadsPerCore       *int                  `json:"ThreadsPerCore"`
	LifeCycleConfig      *lifeCycleInput       `json:"LifeCycleConfig"`
	TrainingPlanArn      string                `json:"TrainingPlanArn"`
	CapacityRequirements *capacityRequirements `json:"CapacityRequirements"`
	InstanceRequirements json.RawMessage       `json:"InstanceRequirements"`
	// KubernetesConfig's nvidia.com/mig.config label is the group's MIG
	// layout; the rest of it is accepted, not acted on.
	KubernetesConfig *kubernetesConfigInput `json:"KubernetesConfig"`
	// Accepted, not acted on (see the list at the top).
	InstanceStorageConfigs  json.RawMessage `json:"InstanceStorageConfigs"`
	OnStartDeepHealthChecks json.RawMessage `json:"OnStartDeepHealthChecks"`
	OverrideVpcConfig       json.RawMessage `json:"OverrideVpcConfig"`
	ScheduledUpdateConfig   json.RawMessage `json:"ScheduledUpdateConfig"`
	ImageId                 json.RawMessage `json:"ImageId"`
	SlurmConfig             json.RawMessage `json:"SlurmConfig"`
	NetworkInterface        json.RawMessage `json:"NetworkInterface"`
}

// kubernetesConfigInput is ClusterKubernetesConfig.
type kubernetesConfigInput struct {
	Labels map[string]string `json:"Labels"`
	Taints json.RawMessage   `json:"Taints"`
}

// maxKubernetesLabels and maxLabelValue are ClusterKubernetesLabels' and
// ClusterKubernetesLabelValue's limits.
const (
	maxKubernetesLabels = 50
	maxLabelValue       = 63
)

type autoScalingInput struct {
	Mode           *string `json:"Mode"`
	AutoScalerType string  `json:"AutoScalerType"`
}

// tieredStorageInput is ClusterTieredStorageConfig.
type tieredStorageInput struct {
	Mode                               *string `json:"Mode"`
	InstanceMemoryAllocationPercentage *int    `json:"InstanceMemoryAllocationPercentage"`
}

// spec is the hyperpod form of t (nil: not sent).
func (t *tieredStorageInput) spec() *hyperpod.TieredStorage {
	if t == nil || t.Mode == nil {
		return nil
	}
	out := &hyperpod.TieredStorage{Mode: *t.Mode}
	if t.InstanceMemoryAllocationPercentage != nil {
		out.MemoryPercent = *t.InstanceMemoryAllocationPercentage
	}
	return out
}

type orchestratorInput struct {
	Eks *struct {
		ClusterArn *string `json:"ClusterArn"`
	} `json:"Eks"`
	Slurm json.RawMessage `json:"Slurm"`
}

// clusterConfigInput is what CreateCluster and UpdateCluster share.
type clusterConfigInput struct {
	ClusterName              *string              `json:"ClusterName"`
	InstanceGroups           []instanceGroupInput `json:"InstanceGroups"`
	RestrictedInstanceGroups json.RawMessage      `json:"RestrictedInstanceGroups"`
	NodeRecovery             string               `json:"NodeRecovery"`
	ClusterRole              string               `json:"ClusterRole"`
	AutoScaling              *autoScalingInput    `json:"AutoScaling"`
	Orchestrator             *orchestratorInput   `json:"Orchestrator"`
	TieredStorageConfig      *tieredStorageInput  `json:"TieredStorageConfig"`
	NodeProvisioningMode     json.RawMessage      `json:"NodeProvisioningMode"`
}

// common checks the members both operations share and returns the ignored
// members that were sent.
func (in *clusterConfigInput) common(ve *validationError) []string {
	var ignored []string
	if in.InstanceGroups != nil {
		ve.listLen(len(in.InstanceGroups), 1, hyperpod.MaxGroups, "instanceGroups")
	}
	if set(in.RestrictedInstanceGroups) {
		ve.Add("RestrictedInstanceGroups", "restrictedInstanceGroups",
			"Restricted instance groups (SageMaker training jobs on HyperPod) are not supported by capstan; use InstanceGroups")
	}
	ve.enum(in.NodeRecovery, "nodeRecovery", hyperpod.RecoveryAutomatic, hyperpod.RecoveryNone)
	ve.arnMember(in.ClusterRole, 20, 2048, "clusterRole", patRoleArn, patRoleArnText)
	if as := in.AutoScaling; as != nil {
		ve.requiredEnum(as.Mode, "autoScaling.mode", "Enable", "Disable")
		ve.enum(as.AutoScalerType, "autoScaling.autoScalerType", "Karpenter")
	}
	if ts := in.TieredStorageConfig; ts != nil {
		ve.requiredEnum(ts.Mode, "tieredStorageConfig.mode", "Enable", "Disable")
		ve.IntRange(ts.InstanceMemoryAllocationPercentage, 0, hyperpod.MaxTieredStoragePercent, "tieredStorageConfig.instanceMemoryAllocationPercentage")
	}
	if set(in.NodeProvisioningMode) {
		ignored = append(ignored, "NodeProvisioningMode")
	}
	if len(in.InstanceGroups) > hyperpod.MaxGroups {
		return ignored // not worth checking each of too many
	}
	seen := map[string]bool{}
	for i, g := range in.InstanceGroups {
		p := fmt.Sprintf("instanceGroups.%d.member", i+1)
		ignored = append(ignored, ve.instanceGroup(&g, p, fmt.Sprintf("InstanceGroups[%d]", i))...)
		if g.InstanceGroupName != nil {
			if seen[*g.InstanceGroupName] {
				ve.Add(*g.InstanceGroupName, p+".instanceGroupName", "Member must be unique among the request's instance groups")
			}
			seen[*g.InstanceGroupName] = true
		}
	}
	return ignored
}

// instanceGroup checks one ClusterInstanceGroupSpecification at path and
// returns the ignored members it sets, named under name.
func (e *validationError) instanceGroup(g *instanceGroupInput, path, name string) []string {
	if e.Required(g.InstanceCount != nil, path+".instanceCount") {
		e.IntRange(g.InstanceCount, 0, hyperpod.MaxNodesPerGroup, path+".instanceCount")
	}
	e.IntRange(g.MinInstanceCount, 0, hyperpod.MaxNodesPerGroup, path+".minInstanceCount")
	if g.InstanceCount != nil && g.MinInstanceCount != nil && *g.MinInstanceCount > *g.InstanceCount {
		e.Add(*g.MinInstanceCount, path+".minInstanceCount", "Member must be less than or equal to InstanceCount")
	}
	e.groupName(g.InstanceGroupName, path+".instanceGroupName")
	if e.Required(g.ExecutionRole != nil, path+".executionRole") {
		if *g.ExecutionRole == "" {
			e.Add("", path+".executionRole", "Member must have length between 20 and 2048")
		}
		e.arnMember(*g.ExecutionRole, 20, 2048, path+".executionRole", patRoleArn, patRoleArnText)
	}
	if set(g.InstanceRequirements) {
		e.Add("InstanceRequirements", path+".instanceRequirements",
			"Flexible instance requirements are not supported by capstan; set InstanceType")
	} else if e.Required(g.InstanceType != nil, path+".instanceType") && *g.InstanceType == "" {
		e.Add("", path+".instanceType", "Member must have length greater than or equal to 1")
	}
	e.IntRange(g.ThreadsPerCore, 1, hyperpod.MaxThreadsPerCore, path+".threadsPerCore")
	var ignored []string
	if lc := g.LifeCycleConfig; lc != nil {
		if lc.SourceS3Uri != "" {
			e.maxLen(lc.SourceS3Uri, 1024, path+".lifeCycleConfig.sourceS3Uri")
			if len(lc.SourceS3Uri) <= 1024 && !patS3Uri.MatchString(lc.SourceS3Uri) {
				e.Add(lc.SourceS3Uri, path+".lifeCycleConfig.sourceS3Uri", "Member must satisfy regular expression pattern: "+patS3UriText)
			}
		}
		if lc.OnCreate != nil && (len(*lc.OnCreate) < 1 || len(*lc.OnCreate) > 128) {
			e.Add(*lc.OnCreate, path+".lifeCycleConfig.onCreate", "Member must have length between 1 and 128")
		}
		if set(lc.OnInitComplete) {
			ignored = append(ignored, name+".LifeCycleConfig.OnInitComplete")
		}
	}
	e.arnMember(g.TrainingPlanArn, 50, 2048, path+".trainingPlanArn", patTrainingPlanArn, patTrainingPlanArnText)
	if cr := g.CapacityRequirements; cr != nil {
		switch {
		case set(cr.Spot) && set(cr.OnDemand):
			e.Add("CapacityRequirements", path+".capacityRequirements", "Member must set exactly one of Spot and OnDemand")
		case set(cr.Spot) && g.TrainingPlanArn != "":
			e.Add("Spot", path+".capacityRequirements.spot", "Member must not be set with TrainingPlanArn: a training plan's instances are reserved")
		}
	}
	for _, m := range []struct {
		raw  json.RawMessage
		name string
	}{
		{g.InstanceStorageConfigs, "InstanceStorageConfigs"}, {g.OnStartDeepHealthChecks, "OnStartDeepHealthChecks"},
		{g.OverrideVpcConfig, "OverrideVpcConfig"}, {g.ScheduledUpdateConfig, "ScheduledUpdateConfig"},
		{g.ImageId, "ImageId"}, {g.SlurmConfig, "SlurmConfig"},
		{g.NetworkInterface, "NetworkInterface"},
	} {
		if set(m.raw) {
			ignored = append(ignored, name+"."+m.name)
		}
	}
	return append(ignored, e.kubernetesConfig(g.KubernetesConfig, path+".kubernetesConfig", name+".KubernetesConfig")...)
}

// kubernetesConfig checks a group's KubernetesConfig at path and returns
// what of it is ignored (named under name): its taints and every label but
// the MIG layout's, in key order. The layout itself is checked against the
// instance type by the cluster service.
func (e *validationError) kubernetesConfig(kc *kubernetesConfigInput, path, name string) []string {
	if kc == nil {
		return nil
	}
	var ignored []string
	if len(kc.Labels) > maxKubernetesLabels {
		e.ListLength(len(kc.Labels), 0, maxKubernetesLabels, path+".labels")
		return nil
	}
	keys := make([]string, 0, len(kc.Labels))
	for k := range kc.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != hyperpod.MIGConfigLabel {
			ignored = append(ignored, name+".Labels."+k)
			continue
		}
		e.Length(kc.Labels[k], 1, maxLabelValue, path+".labels."+k)
	}
	if set(kc.Taints) {
		ignored = append(ignored, name+".Taints")
	}
	return ignored
}

// foreignPlans refuses the first group whose TrainingPlanArn is another
// account's or region's (API.foreignPlan), naming its member.
func (a *API) foreignPlans(gs []instanceGroupInput) error {
	for i, g := range gs {
		if why := a.foreignPlan(g.TrainingPlanArn); why != "" {
			return awsjson.Validationf("InstanceGroups[%d].TrainingPlanArn: %s.", i, why)
		}
	}
	return nil
}

// groupSpec converts a checked instance group.
func groupSpec(g instanceGroupInput) hyperpod.InstanceGroupSpec {
	s := hyperpod.InstanceGroupSpec{Name: *g.InstanceGroupName, InstanceType: *g.InstanceType, Count: *g.InstanceCount,
		ExecutionRole: *g.ExecutionRole, PlanArn: g.TrainingPlanArn}
	if g.MinInstanceCount != nil {
		s.MinCount = *g.MinInstanceCount
	}
	if g.ThreadsPerCore != nil {
		s.ThreadsPerCore = *g.ThreadsPerCore
	}
	if lc := g.LifeCycleConfig; lc != nil {
		s.LifeCycle = &hyperpod.LifeCycleConfig{SourceS3URI: lc.SourceS3Uri}
		if lc.OnCreate != nil {
			s.LifeCycle.OnCreate = *lc.OnCreate
		}
	}
	if g.TrainingPlanArn != "" {
		// The plan's name is the ARN's last part (validated: training-plan/…).
		s.Plan = placement.PlanNamed(g.TrainingPlanArn[strings.LastIndex(g.TrainingPlanArn, "/")+1:])
	}
	s.Spot = g.CapacityRequirements != nil && set(g.CapacityRequirements.Spot)
	if g.KubernetesConfig != nil {
		s.MIGLayout = g.KubernetesConfig.Labels[hyperpod.MIGConfigLabel]
	}
	return s
}

func groupSpecs(gs []instanceGroupInput) []hyperpod.InstanceGroupSpec {
	var out []hyperpod.InstanceGroupSpec
	for _, g := range gs {
		out = append(out, groupSpec(g))
	}
	return out
}

// --- CreateCluster, UpdateCluster, DeleteCluster ----------------------------

type createClusterInput struct {
	clusterConfigInput
	VpcConfig json.RawMessage `json:"VpcConfig"`
	Tags      []endpoint.Tag  `json:"Tags"`
}

func (a *API) createCluster(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[createClusterInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	if in.ClusterName != nil && *in.ClusterName == "" {
		ve.Add("", "clusterName", "Member must have length greater than or equal to 1")
	} else {
		ve.name(in.ClusterName, "clusterName", patResourceName, patResourceNameText)
	}
	// Optional in the model (RestrictedInstanceGroups may stand in), but
	// capstan refuses those: a cluster needs its instance groups.
	ve.Required(in.InstanceGroups != nil, "instanceGroups")
	ignored := in.common(&ve)
	ve.tags(in.Tags)
	if o := in.Orchestrator; o != nil {
		if o.Eks != nil && ve.Required(o.Eks.ClusterArn != nil, "orchestrator.eks.clusterArn") {
			if *o.Eks.ClusterArn == "" {
				ve.Add("", "orchestrator.eks.clusterArn", "Member must have length between 20 and 2048")
			}
			ve.arnMember(*o.Eks.ClusterArn, 20, 2048, "orchestrator.eks.clusterArn", patEksClusterArn, patEksClusterArnText)
		}
		if set(o.Slurm) {
			ignored = append(ignored, "Orchestrator.Slurm")
		}
	}
	if set(in.VpcConfig) {
		ignored = append(ignored, "VpcConfig")
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if err := a.foreignPlans(in.InstanceGroups); err != nil {
		return nil, err
	}
	a.warnIgnored("CreateCluster", ignored)
	spec := hyperpod.ClusterSpec{Name: *in.ClusterName, Groups: groupSpecs(in.InstanceGroups),
		NodeRecovery: in.NodeRecovery, ClusterRole: in.ClusterRole}
	if in.Orchestrator != nil && in.Orchestrator.Eks != nil {
		spec.EksClusterArn = *in.Orchestrator.Eks.ClusterArn
	}
	if as := in.AutoScaling; as != nil {
		spec.AutoScaling = hyperpod.AutoScaling{Mode: *as.Mode, AutoScalerType: as.AutoScalerType}
	}
	if ts := in.TieredStorageConfig.spec(); ts != nil {
		spec.TieredStorage = *ts
	}
	for _, t := range in.Tags {
		spec.Tags = append(spec.Tags, hyperpod.Tag(t))
	}
	c, err := svc.CreateCluster(ctx, spec)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ClusterArn": svc.ARN(c)}, nil
}

type updateClusterInput struct {
	clusterConfigInput
	InstanceGroupsToDelete []string `json:"InstanceGroupsToDelete"`
}

func (a *API) updateCluster(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[updateClusterInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	ignored := in.common(&ve)
	ve.listLen(len(in.InstanceGroupsToDelete), 0, hyperpod.MaxGroups, "instanceGroupsToDelete")
	if len(in.InstanceGroupsToDelete) <= hyperpod.MaxGroups {
		for i, n := range in.InstanceGroupsToDelete {
			ve.groupName(&n, fmt.Sprintf("instanceGroupsToDelete.%d.member", i+1))
		}
	}
	if in.Orchestrator != nil {
		// The EKS cluster is fixed at creation; only the Slurm strategy may
		// change, and capstan keeps no Slurm configuration.
		ignored = append(ignored, "Orchestrator")
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if err := a.foreignPlans(in.InstanceGroups); err != nil {
		return nil, err
	}
	a.warnIgnored("UpdateCluster", ignored)
	u := hyperpod.ClusterUpdate{Groups: groupSpecs(in.InstanceGroups), GroupsToDelete: in.InstanceGroupsToDelete,
		NodeRecovery: in.NodeRecovery, ClusterRole: in.ClusterRole}
	if as := in.AutoScaling; as != nil {
		u.AutoScaling = &hyperpod.AutoScaling{Mode: *as.Mode, AutoScalerType: as.AutoScalerType}
	}
	if ts := in.TieredStorageConfig.spec(); ts != nil {
		u.TieredStorage = ts
	}
	c, err := svc.UpdateCluster(ctx, *in.ClusterName, u)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ClusterArn": svc.ARN(c)}, nil
}

// clusterRefInput is a request that names one cluster (and maybe a node).
type clusterRefInput struct {
	ClusterName   *string `json:"ClusterName"`
	NodeId        *string `json:"NodeId"`
	NodeLogicalId *string `json:"NodeLogicalId"`
}

func decodeClusterRef(body []byte) (string, error) {
	var in clusterRefInput
	if err := decode(body, &in); err != nil {
		return "", err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	if err := ve.Err(); err != nil {
		return "", err
	}
	return *in.ClusterName, nil
}

func (a *API) deleteCluster(ctx context.Context, body []byte) (any, error) {
	svc, err := a.clusters()
	if err != nil {
		return nil, err
	}
	name, err := decodeClusterRef(body)
	if err != nil {
		return nil, err
	}
	c, err := svc.DeleteCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ClusterArn": svc.ARN(c)}, nil
}

// --- DescribeCluster ------------------------------------------------------

type lifeCycleOutput struct {
	SourceS3Uri string `json:"SourceS3Uri"`
	OnCreate    string `json:"OnCreate"`
}

// capacityRequirementsOutput is {"Spot":{}} or {"OnDemand":{}}.
type capacityRequirementsOutput struct {
	Spot     *struct{} `json:"Spot,omitempty"`
	OnDemand *struct{} `json:"OnDemand,omitempty"`
}

type instanceGroupDetails struct {
	CurrentCount         int                         `json:"CurrentCount"`
	TargetCount          int                         `json:"TargetCount"`
	MinCount             *int                        `json:"MinCount,omitempty"`
	InstanceGroupName    string                      `json:"InstanceGroupName"`
	InstanceType         string                      `json:"InstanceType"`
	LifeCycleConfig      *lifeCycleOutput            `json:"LifeCycleConfig,omitempty"`
	ExecutionRole        string                      `json:"ExecutionRole"`
	ThreadsPerCore       *int                        `json:"ThreadsPerCore,omitempty"`
	Status               string                      `json:"Status"`
	TrainingPlanArn      string                      `json:"TrainingPlanArn,omitempty"`
	TrainingPlanStatus   string                      `json:"TrainingPlanStatus,omitempty"`
	CapacityRequirements *capacityRequirementsOutput `json:"CapacityRequirements,omitempty"`
	KubernetesConfig     *kubernetesConfigDetails    `json:"KubernetesConfig,omitempty"`
}

// kubernetesConfigDetails is ClusterKubernetesConfigDetails (groups) and
// ClusterKubernetesConfigNodeDetails (nodes): the labels capstan acts on,
// the MIG layout's. Desired is what the group asks for; Current is what
// its nodes have, absent while some node is not yet Running with it.
type kubernetesConfigDetails struct {
	CurrentLabels map[string]string `json:"CurrentLabels,omitempty"`
	DesiredLabels map[string]string `json:"DesiredLabels,omitempty"`
}

type orchestratorOutput struct {
	Eks struct {
		ClusterArn string `json:"ClusterArn"`
	} `json:"Eks"`
}

type autoScalingOutput struct {
	Mode           string `json:"Mode"`
	AutoScalerType string `json:"AutoScalerType,omitempty"`
	Status         string `json:"Status"`
}

type describeClusterOutput struct {
	ClusterArn     string                 `json:"ClusterArn"`
	ClusterName    string                 `json:"ClusterName"`
	ClusterStatus  string                 `json:"ClusterStatus"`
	CreationTime   Epoch                  `json:"CreationTime"`
	FailureMessage string                 `json:"FailureMessage,omitempty"`
	InstanceGroups []instanceGroupDetails `json:"InstanceGroups"`
	Orchestrator   *orchestratorOutput    `json:"Orchestrator,omitempty"`
	NodeRecovery   string                 `json:"NodeRecovery,omitempty"`
	ClusterRole    string                 `json:"ClusterRole,omitempty"`
	AutoScaling    *autoScalingOutput     `json:"AutoScaling,omitempty"`
	// TieredStorageConfig is ClusterTieredStorageConfig.
	TieredStorageConfig *tieredStorageOutput `json:"TieredStorageConfig,omitempty"`
}

type tieredStorageOutput struct {
	Mode                               string `json:"Mode"`
	InstanceMemoryAllocationPercentage *int   `json:"InstanceMemoryAllocationPercentage,omitempty"`
}

// describeClusterOut is DescribeCluster's output for c, its groups as views
// and arn its ARN. A reserved group's TrainingPlanStatus is its plan's
// status in the capacity calendar (absent without one).
func (a *API) describeClusterOut(c hyperpod.Cluster, views []hyperpod.GroupView, arn string) describeClusterOutput {
	out := describeClusterOutput{ClusterArn: arn, ClusterName: c.Name, ClusterStatus: string(c.Status),
		CreationTime: Epoch{Time: c.Created}, FailureMessage: c.FailureMessage, InstanceGroups: []instanceGroupDetails{},
		NodeRecovery: c.NodeRecovery, ClusterRole: c.ClusterRole}
	if c.EksClusterArn != "" {
		out.Orchestrator = &orchestratorOutput{}
		out.Orchestrator.Eks.ClusterArn = c.EksClusterArn
	}
	if c.AutoScaling.Mode != "" {
		out.AutoScaling = &autoScalingOutput{Mode: c.AutoScaling.Mode, AutoScalerType: c.AutoScaling.AutoScalerType, Status: "InService"}
	}
	if ts := c.TieredStorage; ts.Mode != "" {
		out.TieredStorageConfig = &tieredStorageOutput{Mode: ts.Mode}
		if ts.MemoryPercent > 0 {
			out.TieredStorageConfig.InstanceMemoryAllocationPercentage = ptr(ts.MemoryPercent)
		}
	}
	for _, v := range views {
		d := instanceGroupDetails{CurrentCount: v.Current, TargetCount: v.Target, InstanceGroupName: v.Name,
			InstanceType: v.InstanceType, ExecutionRole: v.ExecutionRole, Status: string(v.Status), TrainingPlanArn: v.PlanArn}
		if v.MinCount > 0 {
			d.MinCount = ptr(v.MinCount)
		}
		if v.ThreadsPerCore > 0 {
			d.ThreadsPerCore = ptr(v.ThreadsPerCore)
		}
		if v.LifeCycle != nil {
			d.LifeCycleConfig = &lifeCycleOutput{SourceS3Uri: v.LifeCycle.SourceS3URI, OnCreate: v.LifeCycle.OnCreate}
		}
		if v.MIGLayout != "" {
			d.KubernetesConfig = &kubernetesConfigDetails{DesiredLabels: map[string]string{hyperpod.MIGConfigLabel: v.MIGLayout}}
			if v.LayoutPending == 0 {
				d.KubernetesConfig.CurrentLabels = d.KubernetesConfig.DesiredLabels
			}
		}
		switch v.CapacityType() {
		case hyperpod.CapacityReserved:
			if a.opts.Capacity != nil {
				if pv, err := a.opts.Capacity.GetPlan(v.Plan.Key); err == nil {
					d.TrainingPlanStatus = pv.Status
				}
			}
		case hyperpod.CapacitySpot:
			d.CapacityRequirements = &capacityRequirementsOutput{Spot: &struct{}{}}
		default:
			d.CapacityRequirements = &capacityRequirementsOutput{OnDemand: &struct{}{}}
		}
		out.InstanceGroups = append(out.InstanceGroups, d)
	}
	return out
}

func (a *API) describeCluster(ctx context.Context, body []byte) (any, error) {
	svc, err := a.clusters()
	if err != nil {
		return nil, err
	}
	name, err := decodeClusterRef(body)
	if err != nil {
		return nil, err
	}
	c, views, err := svc.Cluster(ctx, name)
	if err != nil {
		return nil, err
	}
	return a.describeClusterOut(c, views, svc.ARN(c)), nil
}

// --- ListClusters and ListClusterNodes -------------------------------------

type listClustersInput struct {
	CreationTimeAfter  *Epoch `json:"CreationTimeAfter"`
	CreationTimeBefore *Epoch `json:"CreationTimeBefore"`
	MaxResults         *int   `json:"MaxResults"`
	NameContains       string `json:"NameContains"`
	NextToken          string `json:"NextToken"`
	SortBy             string `json:"SortBy"`
	SortOrder          string `json:"SortOrder"`
	TrainingPlanArn    string `json:"TrainingPlanArn"`
}

type clusterSummary struct {
	ClusterArn       string   `json:"ClusterArn"`
	ClusterName      string   `json:"ClusterName"`
	CreationTime     Epoch    `json:"CreationTime"`
	ClusterStatus    string   `json:"ClusterStatus"`
	TrainingPlanArns []string `json:"TrainingPlanArns,omitempty"`
}

type listClustersOutput struct {
	ClusterSummaries []clusterSummary `json:"ClusterSummaries"`
	NextToken        string           `json:"NextToken,omitempty"`
}

// listPaging checks the members every cluster list shares.
func (e *validationError) listPaging(pg awsjson.Paging, sortBy, sortOrder string) {
	pg.CheckMaxResults(&e.Violations, 100)
	e.maxLen(pg.NextToken, 8192, "nextToken")
	e.enum(sortBy, "sortBy", clusterSortKeys...)
	e.enum(sortOrder, "sortOrder", "Ascending", "Descending")
}

var errClusterToken = awsjson.Validationf("Invalid pagination token.")

func (a *API) listClusters(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[listClustersInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	pg := awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}
	ve.listPaging(pg, in.SortBy, in.SortOrder)
	if in.NameContains != "" {
		ve.maxLen(in.NameContains, 63, "nameContains")
		if !patNameContains.MatchString(in.NameContains) {
			ve.Add(in.NameContains, "nameContains", "Member must satisfy regular expression pattern: "+patNameContainsText)
		}
	}
	ve.arnMember(in.TrainingPlanArn, 50, 2048, "trainingPlanArn", patTrainingPlanArn, patTrainingPlanArnText)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if _, ok := awsjson.ParseToken(in.NextToken); !ok {
		return nil, errClusterToken
	}
	cs, err := svc.Clusters(ctx)
	if err != nil {
		return nil, err
	}
	if a.foreignPlan(in.TrainingPlanArn) != "" {
		cs = nil // no cluster of the caller's runs on another account's plan
	}
	return listClustersPage(*in, cs, svc.ARN)
}

// listClustersPage filters, sorts and pages cs (any order) as in asks. The
// default order is CREATION_TIME, Ascending, as SageMaker documents; ties
// go by name, so pages are stable whatever order cs comes in.
func listClustersPage(in listClustersInput, cs []hyperpod.Cluster, arn func(hyperpod.Cluster) string) (listClustersOutput, error) {
	var plan placement.PlanRef
	if in.TrainingPlanArn != "" {
		plan = placement.PlanNamed(in.TrainingPlanArn[strings.LastIndex(in.TrainingPlanArn, "/")+1:])
	}
	var kept []hyperpod.Cluster
	for _, c := range cs {
		switch {
		case in.NameContains != "" && !strings.Contains(strings.ToLower(c.Name), strings.ToLower(in.NameContains)),
			in.CreationTimeAfter != nil && !c.Created.After(in.CreationTimeAfter.Time),
			in.CreationTimeBefore != nil && !c.Created.Before(in.CreationTimeBefore.Time),
			!plan.IsZero() && !slices.ContainsFunc(c.Groups, func(g hyperpod.Group) bool { return g.Plan == plan }):
			continue
		}
		kept = append(kept, c)
	}
	sortBy(kept, in.SortBy, in.SortOrder, func(c hyperpod.Cluster) (time.Time, string, string) { return c.Created, c.Name, c.ID })
	start, end, next, ok := awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}.Page(len(kept), 10)
	if !ok {
		return listClustersOutput{}, errClusterToken
	}
	out := listClustersOutput{ClusterSummaries: []clusterSummary{}, NextToken: next}
	for _, c := range kept[start:end] {
		s := clusterSummary{ClusterArn: arn(c), ClusterName: c.Name, CreationTime: Epoch{Time: c.Created}, ClusterStatus: string(c.Status)}
		for _, g := range c.Groups {
			if g.PlanArn != "" && !slices.Contains(s.TrainingPlanArns, g.PlanArn) {
				s.TrainingPlanArns = append(s.TrainingPlanArns, g.PlanArn)
			}
		}
		out.ClusterSummaries = append(out.ClusterSummaries, s)
	}
	return out, nil
}

// sortBy sorts items by CREATION_TIME (default) or NAME, Ascending
// (default) or Descending; key gives an item's time, name and a unique id
// that breaks ties.
func sortBy[T any](items []T, by, order string, key func(T) (time.Time, string, string)) {
	slices.SortStableFunc(items, func(x, y T) int {
		tx, nx, ix := key(x)
		ty, ny, iy := key(y)
		c := 0
		if by == "NAME" {
			c = strings.Compare(nx, ny)
		} else {
			c = tx.Compare(ty)
			if c == 0 {
				c = strings.Compare(nx, ny)
			}
		}
		if c == 0 {
			c = strings.Compare(ix, iy)
		}
		if order == "Descending" {
			return -c
		}
		return c
	})
}

type listClusterNodesInput struct {
	ClusterName               *string         `json:"ClusterName"`
	CreationTimeAfter         *Epoch          `json:"CreationTimeAfter"`
	CreationTimeBefore        *Epoch          `json:"CreationTimeBefore"`
	InstanceGroupNameContains *string         `json:"InstanceGroupNameContains"`
	MaxResults                *int            `json:"MaxResults"`
	NextToken                 string          `json:"NextToken"`
	SortBy                    string          `json:"SortBy"`
	SortOrder                 string          `json:"SortOrder"`
	IncludeNodeLogicalIds     json.RawMessage `json:"IncludeNodeLogicalIds"`
}

type instanceStatus struct {
	Status  string `json:"Status"`
	Message string `json:"Message,omitempty"`
}

type clusterNodeSummary struct {
	InstanceGroupName string         `json:"InstanceGroupName"`
	InstanceId        string         `json:"InstanceId"`
	InstanceType      string         `json:"InstanceType"`
	LaunchTime        Epoch          `json:"LaunchTime"`
	InstanceStatus    instanceStatus `json:"InstanceStatus"`
}

type listClusterNodesOutput struct {
	ClusterNodeSummaries []clusterNodeSummary `json:"ClusterNodeSummaries"`
	NextToken            string               `json:"NextToken,omitempty"`
}

func (a *API) listClusterNodes(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[listClusterNodesInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	ve.listPaging(awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}, in.SortBy, in.SortOrder)
	if in.InstanceGroupNameContains != nil {
		ve.groupName(in.InstanceGroupNameContains, "instanceGroupNameContains")
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if _, ok := awsjson.ParseToken(in.NextToken); !ok {
		return nil, errClusterToken
	}
	if set(in.IncludeNodeLogicalIds) {
		a.warnIgnored("ListClusterNodes", []string{"IncludeNodeLogicalIds"})
	}
	nodes, err := svc.Nodes(ctx, *in.ClusterName)
	if err != nil {
		return nil, err
	}
	return listNodesPage(*in, nodes)
}

// listNodesPage filters, sorts and pages nodes (any order) as in asks.
// NAME sorts by instance id (a node's name); CreationTime is the launch.
func listNodesPage(in listClusterNodesInput, nodes []hyperpod.Node) (listClusterNodesOutput, error) {
	var kept []hyperpod.Node
	for _, n := range nodes {
		switch {
		case in.InstanceGroupNameContains != nil && !strings.Contains(strings.ToLower(n.Group), strings.ToLower(*in.InstanceGroupNameContains)),
			in.CreationTimeAfter != nil && !n.Launched.After(in.CreationTimeAfter.Time),
			in.CreationTimeBefore != nil && !n.Launched.Before(in.CreationTimeBefore.Time):
			continue
		}
		kept = append(kept, n)
	}
	sortBy(kept, in.SortBy, in.SortOrder, func(n hyperpod.Node) (time.Time, string, string) { return n.Launched, n.ID, n.ID })
	start, end, next, ok := awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}.Page(len(kept), 10)
	if !ok {
		return listClusterNodesOutput{}, errClusterToken
	}
	out := listClusterNodesOutput{ClusterNodeSummaries: []clusterNodeSummary{}, NextToken: next}
	for _, n := range kept[start:end] {
		out.ClusterNodeSummaries = append(out.ClusterNodeSummaries, clusterNodeSummary{InstanceGroupName: n.Group,
			InstanceId: n.ID, InstanceType: n.InstanceType, LaunchTime: Epoch{Time: n.Launched},
			InstanceStatus: instanceStatus{Status: string(n.Status), Message: n.Message}})
	}
	return out, nil
}

// --- DescribeClusterNode -----------------------------------------------------

type nodeDetails struct {
	InstanceGroupName  string           `json:"InstanceGroupName"`
	InstanceId         string           `json:"InstanceId"`
	InstanceStatus     instanceStatus   `json:"InstanceStatus"`
	InstanceType       string           `json:"InstanceType"`
	LaunchTime         Epoch            `json:"LaunchTime"`
	LifeCycleConfig    *lifeCycleOutput `json:"LifeCycleConfig,omitempty"`
	ThreadsPerCore     *int             `json:"ThreadsPerCore,omitempty"`
	PrivatePrimaryIp   string           `json:"PrivatePrimaryIp"`
	PrivateDnsHostname string           `json:"PrivateDnsHostname"`
	Placement          struct {
		AvailabilityZone string `json:"AvailabilityZone,omitempty"`
	} `json:"Placement"`
	CapacityType     string                   `json:"CapacityType,omitempty"`
	KubernetesConfig *kubernetesConfigDetails `json:"KubernetesConfig,omitempty"`
}

// nodeAddress is a node's private address. A simulated node has none, so
// it is made from the instance id's last six hex digits, in 10.0.0.0/8: the
// same node always shows the same address and hostname.
func nodeAddress(id string) string {
	var b [3]byte
	hex := id[max(len(id)-6, 0):]
	for i := 0; i < len(hex) && i < 6; i++ {
		c := hex[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		}
		b[i/2] = b[i/2]<<4 | v
	}
	return fmt.Sprintf("10.%d.%d.%d", b[0], b[1], b[2])
}

// nodeDetailsOut is DescribeClusterNode's NodeDetails for n of group g
// (nil when the cluster no longer lists the group) in region.
func nodeDetailsOut(n hyperpod.Node, g *hyperpod.InstanceGroupSpec, region string) nodeDetails {
	ip := nodeAddress(n.ID)
	d := nodeDetails{InstanceGroupName: n.Group, InstanceId: n.ID, InstanceType: n.InstanceType,
		InstanceStatus: instanceStatus{Status: string(n.Status), Message: n.Message}, LaunchTime: Epoch{Time: n.Launched},
		PrivatePrimaryIp: ip, PrivateDnsHostname: "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + region + ".compute.internal"}
	d.Placement.AvailabilityZone = n.Zone
	if n.MIGLayout != "" || g != nil && g.MIGLayout != "" {
		var kc kubernetesConfigDetails
		if n.MIGLayout != "" {
			kc.CurrentLabels = map[string]string{hyperpod.MIGConfigLabel: n.MIGLayout}
		}
		if g != nil && g.MIGLayout != "" {
			kc.DesiredLabels = map[string]string{hyperpod.MIGConfigLabel: g.MIGLayout}
		}
		d.KubernetesConfig = &kc
	}
	switch n.CapacityType {
	case hyperpod.CapacitySpot:
		d.CapacityType = "Spot"
	case hyperpod.CapacityOnDemand:
		d.CapacityType = "OnDemand"
	}
	if g != nil {
		if g.LifeCycle != nil {
			d.LifeCycleConfig = &lifeCycleOutput{SourceS3Uri: g.LifeCycle.SourceS3URI, OnCreate: g.LifeCycle.OnCreate}
		}
		if g.ThreadsPerCore > 0 {
			d.ThreadsPerCore = ptr(g.ThreadsPerCore)
		}
	}
	return d
}

func (a *API) describeClusterNode(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[clusterRefInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	id := ve.nodeRef(in.NodeId, in.NodeLogicalId)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	n, err := svc.Node(ctx, *in.ClusterName, id)
	if err != nil {
		return nil, err
	}
	c, _, err := svc.Cluster(ctx, *in.ClusterName)
	if err != nil {
		return nil, err
	}
	var g *hyperpod.InstanceGroupSpec
	for i := range c.Groups {
		if c.Groups[i].Name == n.Group {
			g = &c.Groups[i].InstanceGroupSpec
		}
	}
	return map[string]nodeDetails{"NodeDetails": nodeDetailsOut(n, g, a.opts.Region)}, nil
}

// nodeRef checks DescribeClusterNode's NodeId or NodeLogicalId (one is
// needed) and returns the id. capstan's logical id is the instance id
// (BatchAddClusterNodes answers with it), so either names the node.
func (e *validationError) nodeRef(id, logical *string) string {
	switch {
	case id != nil:
		e.nodeID(*id, "nodeId")
		return *id
	case logical != nil:
		e.nodeLogicalID(*logical, "nodeLogicalId")
		return *logical
	}
	e.Required(false, "nodeId")
	return ""
}

func (e *validationError) nodeLogicalID(id, path string) {
	switch {
	case len(id) < 1 || len(id) > 128:
		e.Add(id, path, "Member must have length between 1 and 128")
	case !patNodeLogicalID.MatchString(id):
		e.Add(id, path, "Member must satisfy regular expression pattern: "+patNodeLogicalIDText)
	}
}

func (e *validationError) nodeID(id, path string) {
	switch {
	case len(id) < 1 || len(id) > 256:
		e.Add(id, path, "Member must have length between 1 and 256")
	case !patClusterNodeID.MatchString(id):
		e.Add(id, path, "Member must satisfy regular expression pattern: "+patClusterNodeIDText)
	}
}

// --- BatchAddClusterNodes, BatchDeleteClusterNodes --------------------------

type addNodesSpec struct {
	InstanceGroupName      *string         `json:"InstanceGroupName"`
	IncrementTargetCountBy *int            `json:"IncrementTargetCountBy"`
	AvailabilityZones      json.RawMessage `json:"AvailabilityZones"`
	InstanceTypes          json.RawMessage `json:"InstanceTypes"`
}

type nodeAdditionResult struct {
	NodeLogicalId     string `json:"NodeLogicalId"`
	InstanceGroupName string `json:"InstanceGroupName"`
	Status            string `json:"Status"`
}

type batchAddError struct {
	InstanceGroupName string `json:"InstanceGroupName"`
	ErrorCode         string `json:"ErrorCode"`
	FailedCount       int    `json:"FailedCount"`
	Message           string `json:"Message,omitempty"`
}

type batchAddOutput struct {
	Successful []nodeAdditionResult `json:"Successful"`
	Failed     []batchAddError      `json:"Failed"`
}

// reasons the node records carry for nodes the batch operations add and
// remove (hyperpod.Node.Reason).
const (
	reasonBatchAdd    = "batch add"
	reasonBatchDelete = "batch delete"
)

type batchAddInput struct {
	ClusterName *string        `json:"ClusterName"`
	ClientToken string         `json:"ClientToken"`
	NodesToAdd  []addNodesSpec `json:"NodesToAdd"`
}

func (a *API) batchAddClusterNodes(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[batchAddInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	ve.maxLen(in.ClientToken, 64, "clientToken")
	if ve.Required(in.NodesToAdd != nil, "nodesToAdd") {
		ve.listLen(len(in.NodesToAdd), 1, maxNodesToAdd, "nodesToAdd")
	}
	if len(in.NodesToAdd) > maxNodesToAdd {
		return nil, ve.Err()
	}
	total := 0
	seen := map[string]bool{}
	for i, s := range in.NodesToAdd {
		p := fmt.Sprintf("nodesToAdd.%d.member", i+1)
		ve.groupName(s.InstanceGroupName, p+".instanceGroupName")
		if ve.Required(s.IncrementTargetCountBy != nil, p+".incrementTargetCountBy") {
			ve.IntRange(s.IncrementTargetCountBy, 1, maxIncrementPerRequest, p+".incrementTargetCountBy")
			if n := *s.IncrementTargetCountBy; n >= 1 && n <= maxIncrementPerRequest {
				total += n // each term is at most 50 and there are at most 5
			}
		}
		if set(s.AvailabilityZones) || set(s.InstanceTypes) {
			ve.Add("AvailabilityZones/InstanceTypes", p, "Per-request availability zones and instance types are not supported by capstan; nodes come as their instance group specifies")
		}
		if s.InstanceGroupName != nil {
			if seen[*s.InstanceGroupName] {
				ve.Add(*s.InstanceGroupName, p+".instanceGroupName", "Member must be unique among NodesToAdd")
			}
			seen[*s.InstanceGroupName] = true
		}
	}
	if total > maxIncrementPerRequest {
		ve.Add(total, "nodesToAdd", fmt.Sprintf("The total of IncrementTargetCountBy must be less than or equal to %d", maxIncrementPerRequest))
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	// A retry with the same ClientToken gets the first answer and adds no
	// more nodes; the token with another request is refused.
	tokenKey := *in.ClusterName + "\x00" + in.ClientToken
	if in.ClientToken != "" {
		if prev, mismatch, ok := a.batchAddTokens.answered(tokenKey, body); ok {
			return prev, nil
		} else if mismatch {
			return nil, awsjson.Validationf("ClientToken %s was already used with a different BatchAddClusterNodes request.", in.ClientToken)
		}
	}
	out := batchAddOutput{Successful: []nodeAdditionResult{}, Failed: []batchAddError{}}
	defer func() {
		if in.ClientToken != "" && len(out.Successful) > 0 {
			a.batchAddTokens.remember(tokenKey, body, out)
		}
	}()
	for _, s := range in.NodesToAdd {
		nodes, err := svc.AddNodes(ctx, *in.ClusterName, *s.InstanceGroupName, *s.IncrementTargetCountBy, reasonBatchAdd)
		if err != nil {
			code, ok := a.addNodesFailure(err)
			if !ok && len(out.Successful) == 0 {
				return nil, err // no node added yet: the call fails as a whole
			}
			if !ok {
				// Nodes were added for earlier groups: answering an error
				// would hide them, so this group fails in the list.
				code = "InvalidInstanceGroupStatus"
			}
			out.Failed = append(out.Failed, batchAddError{InstanceGroupName: *s.InstanceGroupName, ErrorCode: code,
				FailedCount: *s.IncrementTargetCountBy, Message: a.wireMessage(err)})
			continue
		}
		for _, n := range nodes {
			out.Successful = append(out.Successful, nodeAdditionResult{NodeLogicalId: n.ID, InstanceGroupName: n.Group, Status: string(n.Status)})
		}
	}
	return out, nil
}

// addNodesFailure is the BatchAddClusterNodesErrorCode of a group the
// service could not add nodes to; ok is false for errors that are not about
// the group (a missing cluster, capacity, an internal failure).
func (a *API) addNodesFailure(err error) (code string, ok bool) {
	var nf *hyperpod.NotFoundError
	var ce *hyperpod.ConflictError
	switch {
	case errors.As(err, &nf) && nf.Kind == "instance group":
		return "InstanceGroupNotFound", true
	case errors.As(err, &ce):
		return "InvalidInstanceGroupStatus", true
	}
	return "", false
}

type batchDeleteError struct {
	Code    string `json:"Code"`
	Message string `json:"Message"`
	NodeId  string `json:"NodeId"`
}

type batchDeleteLogicalError struct {
	Code          string `json:"Code"`
	Message       string `json:"Message"`
	NodeLogicalId string `json:"NodeLogicalId"`
}

type batchDeleteOutput struct {
	Failed                   []batchDeleteError        `json:"Failed,omitempty"`
	Successful               []string                  `json:"Successful,omitempty"`
	FailedNodeLogicalIds     []batchDeleteLogicalError `json:"FailedNodeLogicalIds,omitempty"`
	SuccessfulNodeLogicalIds []string                  `json:"SuccessfulNodeLogicalIds,omitempty"`
}

// nodeErrorCode words a NodeError's reason as a
// BatchDeleteClusterNodesErrorCode.
func nodeErrorCode(reason hyperpod.NodeErrorReason) string {
	if reason == hyperpod.NodeNotFound {
		return "NodeIdNotFound"
	}
	return "InvalidNodeStatus"
}

type batchDeleteInput struct {
	ClusterName    *string  `json:"ClusterName"`
	NodeIds        []string `json:"NodeIds"`
	NodeLogicalIds []string `json:"NodeLogicalIds"`
}

func (a *API) batchDeleteClusterNodes(ctx context.Context, body []byte) (any, error) {
	svc, in, err := clusterRequest[batchDeleteInput](a, body)
	if err != nil {
		return nil, err
	}
	var ve validationError
	ve.clusterRef(in.ClusterName, "clusterName")
	if in.NodeIds != nil {
		ve.listLen(len(in.NodeIds), 1, hyperpod.MaxNodesPerCall, "nodeIds")
	}
	if in.NodeLogicalIds != nil {
		ve.listLen(len(in.NodeLogicalIds), 1, hyperpod.MaxNodesPerCall-1, "nodeLogicalIds")
	}
	if in.NodeIds == nil && in.NodeLogicalIds == nil {
		ve.Required(false, "nodeIds")
	}
	if len(in.NodeIds)+len(in.NodeLogicalIds) > hyperpod.MaxNodesPerCall {
		if len(in.NodeIds) <= hyperpod.MaxNodesPerCall && len(in.NodeLogicalIds) < hyperpod.MaxNodesPerCall {
			ve.Add(len(in.NodeIds)+len(in.NodeLogicalIds), "nodeIds", fmt.Sprintf("NodeIds and NodeLogicalIds together must have at most %d members", hyperpod.MaxNodesPerCall))
		}
		return nil, ve.Err()
	}
	for i, id := range in.NodeIds {
		ve.nodeID(id, fmt.Sprintf("nodeIds.%d.member", i+1))
	}
	for i, id := range in.NodeLogicalIds {
		ve.nodeLogicalID(id, fmt.Sprintf("nodeLogicalIds.%d.member", i+1))
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	ids := append(slices.Clone(in.NodeIds), in.NodeLogicalIds...)
	deleted, failed, err := svc.DeleteNodes(ctx, *in.ClusterName, ids, reasonBatchDelete)
	if err != nil {
		return nil, err
	}
	// capstan's logical id is the instance id: a result goes back under the
	// member the id was sent in.
	logical := map[string]bool{}
	for _, id := range in.NodeLogicalIds {
		logical[id] = true
	}
	var out batchDeleteOutput
	for _, id := range deleted {
		if logical[id] && !slices.Contains(in.NodeIds, id) {
			out.SuccessfulNodeLogicalIds = append(out.SuccessfulNodeLogicalIds, id)
		} else {
			out.Successful = append(out.Successful, id)
		}
	}
	for _, f := range failed {
		code := nodeErrorCode(f.Reason)
		if logical[f.ID] && !slices.Contains(in.NodeIds, f.ID) {
			out.FailedNodeLogicalIds = append(out.FailedNodeLogicalIds, batchDeleteLogicalError{Code: code, Message: f.Message, NodeLogicalId: f.ID})
		} else {
			out.Failed = append(out.Failed, batchDeleteError{Code: code, Message: f.Message, NodeId: f.ID})
		}
	}
	return out, nil
}
