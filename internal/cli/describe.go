package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

func newDescribeCommand(g *globalOptions) *cobra.Command {
	return describeCommand(newManifestsOptions(g, clock.Real{}))
}

// maxDescribeEvents bounds the events shown; the newest are kept.
const maxDescribeEvents = 20

func describeCommand(o *manifestsOptions) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show one manifest's spec essentials, status, conditions and recent events",
		Long: `Print a human summary of an InferenceEndpointConfig (iec) or JumpStartModel (jsm):
the spec essentials (model, source, instance type, resources, autoscaling), the
status (state, replicas, endpoint URL, SageMaker endpoint), conditions with their
reasons (including why replicas are pending), and the most recent events.
A workspace (ws) shows its template, requests, phase, URL, node and GPU or MIG
slice, conditions and events.`,
		Example: `  capstan describe iec demo
  capstan describe jumpstartmodel deepseek -n team-a`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if k, ok := resolveNodeKind(args[0]); ok && k.name == "node" {
				return o.describeNode(cmd, args[1])
			}
			if res, ok := manifestapi.ResolveWorkspaceKind(args[0]); ok {
				return o.describeWorkspace(cmd, res, namespaceOr(namespace), args[1])
			}
			res, err := resolveKind(args[0])
			if err != nil {
				return err
			}
			ns, name := namespaceOr(namespace), args[1]
			c := o.client()
			var raw json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, manifestapi.ObjectPath(res, ns, name), nil, &raw); err != nil {
				return errors.New(formatAPIError(err))
			}
			obj, err := decodeObject(raw)
			if err != nil {
				return err
			}
			var evs manifestapi.EventList
			evErr := c.do(cmd.Context(), http.MethodGet, manifestapi.ObjectPath(res, ns, name)+"/events", nil, &evs)
			var kv manifestapi.KVCacheReport
			kvErr := c.do(cmd.Context(), http.MethodGet, manifestapi.ObjectPath(res, ns, name)+"/kvcache", nil, &kv)
			o.describe(cmd.OutOrStdout(), obj, evs.Items, evErr, kv.KVCacheReport, kvErr)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace (default \"default\")")
	o.addFlags(cmd)
	return cmd
}

// describe writes the summary. Sections are aligned tables; empty values
// read "<none>" as in kubectl.
func (o *manifestsOptions) describe(w io.Writer, obj manifest.Object, events []manifest.Event, evErr error, kvr manifest.KVCacheReport, kvErr error) {
	m, st, s := obj.GetMeta(), obj.GetStatus(), summarize(obj)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(indent int, k, v string) { fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), k, v) }
	kv(0, "Name", m.Name)
	kv(0, "Namespace", m.Namespace)
	kv(0, "Kind", obj.GetKind())
	kv(0, "API Version", manifest.APIVersion)
	if len(m.Labels) > 0 {
		kv(0, "Labels", joinMap(m.Labels))
	}
	if m.CreationTimestamp != nil {
		kv(0, "Created", fmt.Sprintf("%s (%s ago)", m.CreationTimestamp.UTC().Format(time.RFC3339), o.age(m.CreationTimestamp)))
	}
	kv(0, "Generation", fmt.Sprintf("%d (observed %d)", m.Generation, st.ObservedGeneration))
	fmt.Fprintln(tw, "Spec:")
	kv(1, "Model", orNone(s.model))
	kv(1, "Instance Type", orNone(s.instanceType))
	kv(1, "Replicas", strconv.Itoa(int(s.specReplicas)))
	kv(1, "SageMaker Endpoint", orNone(s.sageMakerEndpoint))
	var as *manifest.AutoScalingSpec
	var kvc *manifest.KVCacheSpec
	var ir *manifest.IntelligentRoutingSpec
	switch x := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		kv(1, "Model Source", describeSource(x.Spec.ModelSourceConfig))
		if wk := x.Spec.Worker; wk != nil {
			kv(1, "Image", orNone(wk.Image))
			if wk.Resources != nil {
				kv(1, "Resources", describeResources(wk.Resources))
			}
		}
		kv(1, "Invocation Path", "/"+strings.TrimPrefix(x.Spec.InvocationEndpoint, "/"))
		as, kvc, ir = x.Spec.AutoScalingSpec, x.Spec.KVCacheSpec, x.Spec.IntelligentRoutingSpec
	case *manifest.JumpStartModel:
		if md := x.Spec.Model; md != nil {
			src := "jumpstart " + md.ModelHubName + "/" + md.ModelID
			if md.ModelVersion != "" {
				src += "@" + md.ModelVersion
			}
			kv(1, "Model Source", src)
		}
		if x.Spec.Server != nil && x.Spec.Server.AcceleratorPartitionType != "" {
			kv(1, "Accelerator Partition", x.Spec.Server.AcceleratorPartitionType)
		}
		as, kvc, ir = x.Spec.AutoScalingSpec, x.Spec.KVCacheSpec, x.Spec.IntelligentRoutingSpec
	}
	if as != nil {
		kv(1, "Autoscaling", describeAutoscaling(as))
		for _, t := range triggers(as) {
			kv(2, "Trigger", t)
		}
	}
	if kvc != nil {
		kv(1, "KV Cache", describeKVSpec(kvc))
	}
	if ir != nil && ir.Enabled != nil && *ir.Enabled {
		kv(1, "Intelligent Routing", ir.RoutingStrategy)
	}
	// Accepted but without effect here: the same list the controller's
	// Warning events and apply's warnings come from.
	if ignored := manifest.IgnoredFields(obj); len(ignored) > 0 {
		fmt.Fprintln(tw, "Ignored fields (accepted, no effect here):")
		for _, f := range ignored {
			// No tab: a long path must not widen the Spec/Status columns.
			fmt.Fprintf(tw, "  %s: %s\n", f.Path, f.Reason)
		}
	}
	fmt.Fprintln(tw, "Status:")
	kv(1, "State", orNone(string(st.State)))
	kv(1, "Replicas", fmt.Sprintf("%d current, %d ready", st.Replicas, st.ReadyReplicas))
	url := ""
	if st.Endpoints != nil {
		url = st.Endpoints.URL
	}
	kv(1, "Endpoint URL", orNone(url))
	if st.Endpoints != nil && st.Endpoints.SageMaker != nil {
		sm := st.Endpoints.SageMaker
		kv(1, "SageMaker Endpoint", strings.TrimSpace(sm.State+"  "+sm.EndpointArn))
	}
	if ds := st.DeploymentStatus; ds != nil && (ds.Reason != "" || ds.Message != "" || ds.DeploymentObjectOverallState != "") {
		v := ds.Reason
		if ds.DeploymentObjectOverallState != string(st.State) {
			v = strings.TrimSpace(ds.DeploymentObjectOverallState + " " + v)
		}
		if ds.Message != "" {
			v += ": " + ds.Message
		}
		kv(1, "Deployment", strings.TrimSpace(v))
	}
	if ms := st.MetricsStatus; ms != nil && ms.ErrorMessage != "" {
		kv(1, "Metrics", ms.State+": "+ms.ErrorMessage)
	}
	_ = tw.Flush()
	describeKVCache(w, kvr, kvErr)

	tw = tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "Conditions:")
	if len(st.Conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range st.Conditions {
			t := c.LastTransitionTime
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orNone(c.Reason), o.age(&t), c.Message)
		}
		_ = tw.Flush()
	}
	o.writeEvents(w, events, evErr)
}

// writeEvents prints the newest maxDescribeEvents events.
func (o *manifestsOptions) writeEvents(w io.Writer, events []manifest.Event, evErr error) {
	fmt.Fprintln(w, "Events:")
	switch {
	case evErr != nil:
		fmt.Fprintf(w, "  <unavailable: %s>\n", formatAPIError(evErr))
	case len(events) == 0:
		fmt.Fprintln(w, "  <none>")
	default:
		if len(events) > maxDescribeEvents {
			events = events[len(events)-maxDescribeEvents:]
		}
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tREASON\tAGE\tMESSAGE")
		for _, e := range events {
			t := e.Time
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", e.Type, e.Reason, o.age(&t), e.Message)
		}
		_ = tw.Flush()
	}
}

// describeKVSpec is the spec's tiers in a line: "L1 on (8Gi), L2
// tieredstorage (20Gi)"; a size shows only where it is set.
func describeKVSpec(kvc *manifest.KVCacheSpec) string {
	l1 := onOff(kvc.EnableL1Cache)
	if kvc.L1On() && kvc.L1CacheSize != "" {
		l1 += " (" + string(kvc.L1CacheSize) + ")"
	}
	l2 := "off"
	if kvc.L2On() {
		l2 = kvc.L2CacheSpec.L2CacheBackend
		if kvc.L2Backend() == manifest.L2BackendTieredStorage && kvc.L2CacheSpec.L2CacheSize != "" {
			l2 += " (" + string(kvc.L2CacheSpec.L2CacheSize) + ")"
		}
	}
	return fmt.Sprintf("L1 %s, L2 %s", l1, l2)
}

// kvScopes words a tier's scope in the table.
var kvScopes = map[string]string{manifest.KVScopeReplica: "per replica", manifest.KVScopeNode: "per node", manifest.KVScopeShared: "shared"}

// describeKVCache writes the KV Cache Tiers section: each tier's size, use and
// hit rate, as the server computed them from the replicas' metrics.
func describeKVCache(w io.Writer, r manifest.KVCacheReport, err error) {
	fmt.Fprintln(w, "KV Cache Tiers:")
	if err != nil {
		fmt.Fprintf(w, "  <unavailable: %s>\n", formatAPIError(err))
		return
	}
	if len(r.Tiers) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "  TIER\tSCOPE\tSIZE\tUSE\tHIT RATE")
	for _, t := range r.Tiers {
		scope := kvScopes[t.Scope]
		if scope == "" {
			scope = t.Scope
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", t.Name, scope, kvSize(t), percent(t.Usage), percent(t.HitRate))
	}
	_ = tw.Flush()
	switch {
	case r.Replicas == 0:
		fmt.Fprintln(w, "  No replica runs: sizes are from the spec.")
	case r.Scraped == 0:
		fmt.Fprintf(w, "  No metrics from the %d replica(s) yet: sizes are from their flags.\n", r.Replicas)
	case r.QueriedTokens == 0:
		fmt.Fprintf(w, "  Metrics of %d/%d replicas. No prompt looked up yet.\n", r.Scraped, r.Replicas)
	default:
		fmt.Fprintf(w, "  Metrics of %d/%d replicas. Hit rate: the share of the %.0f prompt tokens looked up that the tier served.\n",
			r.Scraped, r.Replicas, r.QueriedTokens)
	}
}

// kvSize is "2 × 8 GiB" (units × each), "8 GiB each" when none runs,
// tokens when a GPU's bytes are unknown, "-" when nothing is known.
func kvSize(t manifest.KVTierReport) string {
	switch {
	case t.Units > 0 && t.EachBytes > 0:
		return fmt.Sprintf("%d × %s", t.Units, manifest.FormatBytes(t.EachBytes))
	case t.Units > 0 && t.CapacityTokens > 0:
		return fmt.Sprintf("%d × %d tokens", t.Units, t.CapacityTokens/int64(t.Units))
	case t.Units == 0 && t.EachBytes > 0 && t.Scope == manifest.KVScopeShared:
		return manifest.FormatBytes(t.EachBytes)
	case t.EachBytes > 0:
		return manifest.FormatBytes(t.EachBytes) + " each"
	}
	return "-"
}

func percent(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p*100, 'f', 1, 64) + "%"
}

func onOff(b *bool) string {
	if b != nil && *b {
		return "on"
	}
	return "off"
}

func joinMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

func joinQuantities(m map[string]manifest.Quantity) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + string(m[k])
	}
	return strings.Join(keys, " ")
}

func describeResources(r *manifest.ResourceRequirements) string {
	var parts []string
	if len(r.Requests) > 0 {
		parts = append(parts, "requests "+joinQuantities(r.Requests))
	}
	if len(r.Limits) > 0 {
		parts = append(parts, "limits "+joinQuantities(r.Limits))
	}
	return orNone(strings.Join(parts, "; "))
}

func describeSource(c *manifest.ModelSourceConfig) string {
	if c == nil {
		return "<none>"
	}
	var s string
	switch c.ModelSourceType {
	case manifest.SourceS3:
		if c.S3Storage != nil {
			s = fmt.Sprintf("s3://%s/%s (%s)", c.S3Storage.BucketName, c.ModelLocation, c.S3Storage.Region)
		}
	case manifest.SourceFSx:
		if c.FSxStorage != nil {
			s = fmt.Sprintf("fsx %s:/%s/%s", c.FSxStorage.FileSystemID, c.FSxStorage.MountName, strings.TrimPrefix(c.ModelLocation, "/"))
		}
	case manifest.SourceHuggingFace:
		if c.HuggingFaceModel != nil {
			s = "huggingface " + c.HuggingFaceModel.ModelID
			if c.HuggingFaceModel.CommitSHA != "" {
				s += "@" + c.HuggingFaceModel.CommitSHA
			}
		}
	}
	if s == "" {
		s = strings.TrimSpace(c.ModelSourceType + " " + c.ModelLocation)
	}
	if c.PrefetchEnabled {
		s += ", prefetch"
	}
	return s
}

func i32(p *int32) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(int(*p))
}

func describeAutoscaling(a *manifest.AutoScalingSpec) string {
	return fmt.Sprintf("min %s, max %s, polling %ss, cooldown %ss, initial cooldown %ss, stabilization up %ss / down %ss",
		i32(a.MinReplicaCount), i32(a.MaxReplicaCount), i32(a.PollingInterval), i32(a.CooldownPeriod),
		i32(a.InitialCooldownPeriod), i32(a.ScaleUpStabilizationTime), i32(a.ScaleDownStabilizationTime))
}

func f64(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

// triggers lists every trigger of a spec, one line each.
func triggers(a *manifest.AutoScalingSpec) []string {
	var out []string
	cw := a.CloudWatchTriggerList
	if a.CloudWatchTrigger != nil {
		cw = append([]manifest.CloudWatchTrigger{*a.CloudWatchTrigger}, cw...)
	}
	for _, t := range cw {
		out = append(out, fmt.Sprintf("cloudwatch %s/%s %s target %s activation %s", t.Namespace, t.MetricName, t.MetricStat, f64(t.TargetValue), f64(t.ActivationTargetValue)))
	}
	pt := a.PrometheusTriggerList
	if a.PrometheusTrigger != nil {
		pt = append([]manifest.PrometheusTrigger{*a.PrometheusTrigger}, pt...)
	}
	for _, t := range pt {
		out = append(out, fmt.Sprintf("prometheus %q at %s target %s activation %s", t.Query, t.ServerAddress, f64(t.TargetValue), f64(t.ActivationTargetValue)))
	}
	return out
}
