package hyperpod

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/internal/placement"
)

// reName is SageMaker's ClusterName and InstanceGroupName pattern.
var reName = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)

// reRoleArn is an IAM role ARN, as SageMaker's ClusterRole pattern (with
// the XXXXXXXXXXXX account placeholder the HyperPod documentation prints).
var reRoleArn = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::(\d{12}|X{12}):role/?[a-zA-Z_0-9+=,.@\-_/]+$`)

func fieldf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// validateSpec checks a CreateCluster request and returns its groups with
// their targets set. Errors are *FieldError naming the member.
func (s *Service) validateSpec(spec ClusterSpec, now time.Time) ([]Group, error) {
	if !reName.MatchString(spec.Name) {
		return nil, fieldf("ClusterName", "%q must be 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit", spec.Name)
	}
	if n := len(spec.Groups); n < 1 || n > MaxGroups {
		return nil, fieldf("InstanceGroups", "a cluster has 1 to %d instance groups, not %d", MaxGroups, n)
	}
	seen := map[string]bool{}
	groups := make([]Group, 0, len(spec.Groups))
	for i, g := range spec.Groups {
		g, err := s.validateGroup(fmt.Sprintf("InstanceGroups[%d]", i), g, now)
		if err != nil {
			return nil, err
		}
		if seen[g.Name] {
			return nil, fieldf(fmt.Sprintf("InstanceGroups[%d].InstanceGroupName", i), "instance group %s is named twice", g.Name)
		}
		seen[g.Name] = true
		groups = append(groups, Group{InstanceGroupSpec: g, Target: g.Count, Status: GroupCreating})
	}
	if err := checkRecovery(spec.NodeRecovery); err != nil {
		return nil, err
	}
	if err := checkAutoScaling(spec.AutoScaling, spec.ClusterRole); err != nil {
		return nil, err
	}
	if err := checkTieredStorage(spec.TieredStorage); err != nil {
		return nil, err
	}
	if len(spec.Tags) > MaxTags {
		return nil, fieldf("Tags", "%d tags; the limit is %d", len(spec.Tags), MaxTags)
	}
	for i, t := range spec.Tags {
		if k, v := utf8.RuneCountInString(t.Key), utf8.RuneCountInString(t.Value); k < 1 || k > 128 || v > 256 {
			return nil, fieldf(fmt.Sprintf("Tags[%d]", i), "a tag key has 1 to 128 characters and a value at most 256")
		}
	}
	return groups, nil
}

// validateGroup checks one instance group (at member path at) and returns
// it completed: a reserved group's plan resolved from its ARN and its
// instance type taken from the plan when empty.
func (s *Service) validateGroup(at string, g InstanceGroupSpec, now time.Time) (InstanceGroupSpec, error) {
	if !reName.MatchString(g.Name) {
		return g, fieldf(at+".InstanceGroupName", "%q must be 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit", g.Name)
	}
	if g.Plan.IsZero() && g.PlanArn != "" {
		name := g.PlanArn
		if _, after, ok := strings.Cut(g.PlanArn, ":training-plan/"); ok {
			name = after
		}
		g.Plan = placement.PlanNamed(name)
	}
	if !g.Plan.IsZero() {
		if g.Spot {
			return g, fieldf(at+".CapacityRequirements", "a group on a training plan cannot also be spot")
		}
		info, ok := s.o.Plans.Plan(g.Plan)
		switch {
		case !ok:
			return g, fieldf(at+".TrainingPlanArn", "training plan %s does not exist", g.Plan)
		case !info.Targets(placement.TargetHyperPodCluster):
			return g, fieldf(at+".TrainingPlanArn", "training plan %s does not target %s", info.Name, placement.TargetHyperPodCluster)
		case !now.Before(info.End):
			return g, fieldf(at+".TrainingPlanArn", "training plan %s ended at %s", info.Name, info.End.Format(time.RFC3339))
		}
		if g.InstanceType == "" {
			g.InstanceType = info.InstanceType
		}
		if g.InstanceType != info.InstanceType {
			return g, fieldf(at+".InstanceType", "%s differs from training plan %s's instance type %s", g.InstanceType, info.Name, info.InstanceType)
		}
		if g.Count > info.Total {
			return g, fieldf(at+".InstanceCount", "%d exceeds training plan %s's %d instances", g.Count, info.Name, info.Total)
		}
		g.Plan = info.Ref
	}
	if _, err := s.o.Catalog.InstanceType(g.InstanceType); err != nil {
		return g, &FieldError{Field: at + ".InstanceType", Message: err.Error()}
	}
	if _, err := s.partitions(g.InstanceType, g.MIGLayout); err != nil {
		return g, fieldf(at+".KubernetesConfig.Labels."+MIGConfigLabel, "instance group %s: %v", g.Name, err)
	}
	if g.Count < 0 || g.Count > MaxNodesPerGroup {
		return g, fieldf(at+".InstanceCount", "%d must be in [0, %d]", g.Count, MaxNodesPerGroup)
	}
	if g.MinCount < 0 || g.MinCount > g.Count {
		return g, fieldf(at+".MinInstanceCount", "%d must be in [0, InstanceCount %d]", g.MinCount, g.Count)
	}
	if g.ExecutionRole == "" {
		return g, fieldf(at+".ExecutionRole", "required")
	}
	if g.ThreadsPerCore < 0 || g.ThreadsPerCore > MaxThreadsPerCore {
		return g, fieldf(at+".ThreadsPerCore", "%d must be 1 or %d", g.ThreadsPerCore, MaxThreadsPerCore)
	}
	return g, nil
}

func checkRecovery(v string) error {
	if v != "" && v != RecoveryAutomatic && v != RecoveryNone {
		return fieldf("NodeRecovery", "%q must be %s or %s", v, RecoveryAutomatic, RecoveryNone)
	}
	return nil
}

// checkAutoScaling: Karpenter needs a ClusterRole to act with.
func checkAutoScaling(a AutoScaling, role string) error {
	if a.Mode != "" && a.Mode != "Enable" && a.Mode != "Disable" {
		return fieldf("AutoScaling.Mode", "%q must be Enable or Disable", a.Mode)
	}
	if a.AutoScalerType != "" && a.AutoScalerType != "Karpenter" {
		return fieldf("AutoScaling.AutoScalerType", "%q must be Karpenter", a.AutoScalerType)
	}
	if a.Enabled() && role == "" {
		return fieldf("ClusterRole", "required when AutoScaling.Mode is Enable")
	}
	if role != "" && !reRoleArn.MatchString(role) {
		return fieldf("ClusterRole", "%q is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)", role)
	}
	return nil
}

func checkTieredStorage(t TieredStorage) error {
	if t.Mode != "" && t.Mode != "Enable" && t.Mode != "Disable" {
		return fieldf("TieredStorageConfig.Mode", "%q must be Enable or Disable", t.Mode)
	}
	if t.MemoryPercent < 0 || t.MemoryPercent > MaxTieredStoragePercent {
		return fieldf("TieredStorageConfig.InstanceMemoryAllocationPercentage", "%d must be in [0, %d]", t.MemoryPercent, MaxTieredStoragePercent)
	}
	if t.Enabled() && t.MemoryPercent == 0 {
		return fieldf("TieredStorageConfig.InstanceMemoryAllocationPercentage", "required (1 to %d) when Mode is Enable", MaxTieredStoragePercent)
	}
	return nil
}

// applyUpdate applies u to rec, validating it as CreateCluster would.
func (s *Service) applyUpdate(rec *record, u ClusterUpdate, now time.Time) error {
	if err := checkRecovery(u.NodeRecovery); err != nil {
		return err
	}
	role := rec.ClusterRole
	if u.ClusterRole != "" {
		role = u.ClusterRole
	}
	as := rec.AutoScaling
	if u.AutoScaling != nil {
		as = *u.AutoScaling
	}
	if err := checkAutoScaling(as, role); err != nil {
		return err
	}
	ts := rec.TieredStorage
	if u.TieredStorage != nil {
		ts = *u.TieredStorage
		if err := checkTieredStorage(ts); err != nil {
			return err
		}
	}
	if len(u.GroupsToDelete) > MaxGroups {
		return fieldf("InstanceGroupsToDelete", "%d groups; the limit is %d", len(u.GroupsToDelete), MaxGroups)
	}
	updated := map[string]bool{}
	for _, g := range u.Groups {
		updated[g.Name] = true
	}
	for i, name := range u.GroupsToDelete {
		at := fmt.Sprintf("InstanceGroupsToDelete[%d]", i)
		if g := rec.group(name); g == nil || g.Status == GroupDeleting {
			return fieldf(at, "instance group %s not found", name)
		}
		if updated[name] {
			return fieldf(at, "instance group %s is both updated and deleted", name)
		}
	}
	if len(u.Groups) > MaxGroups {
		return fieldf("InstanceGroups", "%d groups; the limit is %d", len(u.Groups), MaxGroups)
	}
	seen := map[string]bool{}
	for i, g := range u.Groups {
		at := fmt.Sprintf("InstanceGroups[%d]", i)
		old := rec.group(g.Name)
		if old != nil && g.InstanceType == "" {
			g.InstanceType = old.InstanceType
		}
		g, err := s.validateGroup(at, g, now)
		if err != nil {
			return err
		}
		if seen[g.Name] {
			return fieldf(at+".InstanceGroupName", "instance group %s is named twice", g.Name)
		}
		seen[g.Name] = true
		if old == nil {
			rec.Groups = append(rec.Groups, Group{InstanceGroupSpec: g, Target: g.Count, Status: GroupCreating})
			continue
		}
		if old.Status == GroupDeleting {
			return &ConflictError{Name: rec.Name, Message: fmt.Sprintf("instance group %s is being deleted", g.Name)}
		}
		if g.InstanceType != old.InstanceType || g.Plan != old.Plan || g.Spot != old.Spot {
			return fieldf(at+".InstanceType", "instance group %s's instance type and capacity source cannot change", g.Name)
		}
		old.InstanceGroupSpec = g
		old.Target = g.Count
		old.Status = GroupUpdating
	}
	if len(rec.Groups) > MaxGroups {
		return fieldf("InstanceGroups", "the cluster would have %d groups; the limit is %d", len(rec.Groups), MaxGroups)
	}
	for _, name := range u.GroupsToDelete {
		g := rec.group(name)
		g.Target, g.Status = 0, GroupDeleting
	}
	if u.NodeRecovery != "" {
		rec.NodeRecovery = u.NodeRecovery
	}
	rec.ClusterRole, rec.AutoScaling, rec.TieredStorage = role, as, ts
	return nil
}
