package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/nodeapi"
)

// nodeKind is a kind the node API serves, with the names the CLI accepts.
type nodeKind struct {
	name  string // what messages call it
	path  string // the collection's path
	names []string
}

var nodeKinds = []nodeKind{
	{"node", nodeapi.CapstanPath + "nodes", []string{"node", "nodes", "no"}},
	{"cluster", nodeapi.CapstanPath + "clusters", []string{"cluster", "clusters"}},
	{"nodepool", nodeapi.NodePoolPath + "nodepools", []string{"nodepool", "nodepools", "np", "nodepool.karpenter.sh", "nodepools.karpenter.sh"}},
	{"hyperpodnodeclass", nodeapi.NodeClassPath + "hyperpodnodeclasses", []string{"hyperpodnodeclass", "hyperpodnodeclasses", "nodeclass", "nodeclasses"}},
}

// label is kubectl's resource.group spelling of the kind.
func (k nodeKind) label() string {
	switch k.name {
	case "nodepool":
		return "nodepool.karpenter.sh"
	case "hyperpodnodeclass":
		return "hyperpodnodeclass.karpenter.sagemaker.amazonaws.com"
	}
	return k.name
}

// nodeKindOf is the node kind of a manifest kind (NodePool,
// HyperpodNodeClass).
func nodeKindOf(kind string) (nodeKind, bool) {
	switch kind {
	case nodeapi.KindNodePool, nodeapi.KindNodeClass:
		return resolveNodeKind(kind)
	}
	return nodeKind{}, false
}

func resolveNodeKind(s string) (nodeKind, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, k := range nodeKinds {
		for _, n := range k.names {
			if s == n {
				return k, true
			}
		}
	}
	return nodeKind{}, false
}

// getNodeKind prints nodes, clusters, node pools or node classes.
func (o *manifestsOptions) getNodeKind(cmd *cobra.Command, k nodeKind, name, clusterName, output string) error {
	path := k.path
	if name != "" {
		if k.name == "cluster" {
			return errors.New("get cluster takes no NAME; use aws sagemaker describe-cluster for one cluster")
		}
		path += "/" + url.PathEscape(name)
	} else if clusterName != "" && k.name == "node" {
		path += "?cluster=" + url.QueryEscape(clusterName)
	}
	var raw json.RawMessage
	if err := o.client().do(cmd.Context(), http.MethodGet, path, nil, &raw); err != nil {
		return errors.New(formatAPIError(err))
	}
	w := cmd.OutOrStdout()
	if output == "json" || output == "yaml" {
		return writeRaw(w, raw, output)
	}
	if name != "" {
		raw = append(append([]byte(`{"items":[`), raw...), "]}"...)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	defer tw.Flush()
	switch k.name {
	case "node":
		var l nodeapi.List[nodeapi.NodeView]
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("decode nodes: %w", err)
		}
		if len(l.Items) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
			return nil
		}
		fmt.Fprintln(tw, "NAME\tCLUSTER\tGROUP\tINSTANCE TYPE\tCAPACITY\tSTATUS\tGPUS\tREPLICAS\tPRICE/H\tAGE")
		for _, n := range l.Items {
			status := string(n.Status)
			if n.Cordoned && n.Status == "Running" {
				status += ",Cordoned"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t$%.2f\t%s\n", n.Name, n.Cluster, n.Group, n.InstanceType,
				n.CapacityType, status, gpuColumn(n), len(n.Replicas), n.PricePerHour, o.ageOf(n.Launched))
		}
	case "cluster":
		var l nodeapi.List[nodeapi.ClusterView]
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("decode clusters: %w", err)
		}
		if len(l.Items) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
			return nil
		}
		fmt.Fprintln(tw, "NAME\tSTATUS\tNODES\tGROUPS\tAUTOSCALING\tNODE RECOVERY\tAGE")
		for _, c := range l.Items {
			cur, target := 0, 0
			var gs []string
			for _, g := range c.Groups {
				cur, target = cur+g.Current, target+g.Target
				gs = append(gs, fmt.Sprintf("%s(%s %d/%d)", g.Name, g.CapacityType, g.Current, g.Target))
			}
			as := "Disabled"
			if c.AutoScaling.Mode == "Enable" {
				as = "Karpenter"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", c.Name, c.Status, cur, target, orNone(strings.Join(gs, ",")),
				as, c.NodeRecovery, o.ageOf(c.Created))
		}
	default:
		var l nodeapi.ObjectList
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("decode %s: %w", k.name, err)
		}
		if len(l.Items) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
			return nil
		}
		age := func(v *nodeapi.Object) string {
			if v.Metadata.CreationTimestamp == nil {
				return o.ageOf(time.Time{})
			}
			return o.ageOf(*v.Metadata.CreationTimestamp)
		}
		nodeCount := func(v *nodeapi.Object) int {
			if v.Status == nil {
				return 0
			}
			return v.Status.Nodes
		}
		if k.name == "nodepool" {
			fmt.Fprintln(tw, "NAME\tCLUSTER\tNODECLASS\tNODES\tREADY\tCONSOLIDATION\tLIMITS\tAGE")
			for _, v := range l.Items {
				p, err := v.NodePool()
				if err != nil {
					return fmt.Errorf("NodePool %s: %w", v.Metadata.Name, err)
				}
				cl := p.Cluster
				if cl == "" {
					cl = cluster.DefaultName
				}
				after := p.Disruption.ConsolidateAfter.String()
				if p.Disruption.Never {
					after = "Never"
				}
				ready, _ := v.Ready()
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%t\t%s after %s\t%s\t%s\n", v.Metadata.Name, cl, p.NodeClass, nodeCount(v), ready,
					p.Disruption.ConsolidationPolicy, after, limitsText(p.Limits.Nodes, p.Limits.GPUs), age(v))
			}
			return nil
		}
		fmt.Fprintln(tw, "NAME\tINSTANCE GROUPS\tNODES\tAGE")
		for _, v := range l.Items {
			c, err := v.NodeClass()
			if err != nil {
				return fmt.Errorf("HyperpodNodeClass %s: %w", v.Metadata.Name, err)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", v.Metadata.Name, strings.Join(c.InstanceGroups, ","), nodeCount(v), age(v))
		}
	}
	return nil
}

func limitsText(nodes, gpus int) string {
	var parts []string
	if nodes > 0 {
		parts = append(parts, "nodes="+strconv.Itoa(nodes))
	}
	if gpus > 0 {
		parts = append(parts, "gpus="+strconv.Itoa(gpus))
	}
	return orNone(strings.Join(parts, ","))
}

// ageOf is the AGE of a time by the server's clock, "<unknown>" when
// unset. The server's Date is in whole seconds, so t is cut to the second
// too: an age never reads short of what the server's clock measured.
func (o *manifestsOptions) ageOf(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return humanAge(o.now().Sub(t.Truncate(time.Second)))
}

// describeNode prints one node: what it is, why it exists, what runs on it,
// what it costs and what happened to it.
func (o *manifestsOptions) describeNode(cmd *cobra.Command, name string) error {
	var n nodeapi.NodeView
	if err := o.client().do(cmd.Context(), http.MethodGet, nodeapi.CapstanPath+"nodes/"+url.PathEscape(name), nil, &n); err != nil {
		return errors.New(formatAPIError(err))
	}
	w := cmd.OutOrStdout()
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Name", n.Name)
	row("Instance ID", n.ID)
	row("Cluster", n.Cluster)
	row("Instance Group", n.Group)
	row("Instance Type", n.InstanceType)
	row("Capacity Type", string(n.CapacityType))
	if n.Plan.Key != "" {
		row("Training Plan", n.Plan.Key)
	}
	row("Zone", orNone(n.Zone))
	status := string(n.Status)
	if n.Message != "" {
		status += " (" + n.Message + ")"
	}
	row("Status", status)
	row("Cordoned", strconv.FormatBool(n.Cordoned))
	row("Launched", n.Launched.UTC().Format(time.RFC3339)+" ("+o.ageOf(n.Launched)+" ago)")
	if !n.Ready.IsZero() {
		row("Ready", n.Ready.UTC().Format(time.RFC3339)+" (launch took "+n.Ready.Sub(n.Launched).String()+")")
	}
	if !n.InterruptAt.IsZero() {
		row("Spot Interruption", n.InterruptAt.UTC().Format(time.RFC3339))
	}
	row("Price", fmt.Sprintf("$%.4f/hour", n.PricePerHour))
	row("Why", n.Reason)
	row("Capacity", fmt.Sprintf("gpu=%d cpu=%s memory=%s", n.Capacity.GPUs, strconv.FormatInt(n.Capacity.MilliCPU/1000, 10), bytesText(n.Capacity.MemoryBytes)))
	row("Allocated", fmt.Sprintf("gpu=%d cpu=%sm memory=%s", n.Allocated.GPUs, strconv.FormatInt(n.Allocated.MilliCPU, 10), bytesText(n.Allocated.MemoryBytes)))
	row("Replicas", orNone(strings.Join(n.Replicas, ", ")))
	tw.Flush()
	writeGPUs(w, n)
	fmt.Fprintln(w, "Events:")
	if len(n.Events) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	ew := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(ew, "  TYPE\tREASON\tAGE\tMESSAGE")
	for _, e := range n.Events {
		fmt.Fprintf(ew, "  %s\t%s\t%s\t%s\n", e.Type, e.Reason, o.ageOf(e.Time), e.Message)
	}
	return ew.Flush()
}

// gpuColumn is get nodes' GPUS: whole GPUs allocated of all, and on a
// node with MIG slices how many there are and how many are held
// ("0/8 (56 MIG slices: 12 used)").
func gpuColumn(n nodeapi.NodeView) string {
	s := fmt.Sprintf("%d/%d", n.Allocated.GPUs, n.Capacity.GPUs)
	if len(n.Slices) == 0 {
		return s
	}
	used := 0
	for _, sl := range n.Slices {
		if sl.ReplicaID != "" {
			used++
		}
	}
	return fmt.Sprintf("%s (%d MIG slices: %d used)", s, len(n.Slices), used)
}

// writeGPUs is describe node's GPUs section: the node's MIG layout, then
// each GPU by index, whole or with its slices: a held slice on a line of
// its own with its replica, the free ones of a profile counted on one line
// (a p5 split seven ways would otherwise take 56 lines).
func writeGPUs(w io.Writer, n nodeapi.NodeView) {
	layout := n.MIGLayout
	if layout == "" {
		layout = "none (whole GPUs)"
	}
	fmt.Fprintf(w, "GPUs:\n  MIG layout: %s\n", layout)
	if n.Capacity.GPUs == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	if len(n.Slices) == 0 {
		fmt.Fprintf(w, "  %d whole, %d allocated\n", n.Capacity.GPUs, n.Allocated.GPUs)
		return
	}
	byGPU := map[int][]cluster.Slice{}
	for _, sl := range n.Slices {
		byGPU[sl.GPU] = append(byGPU[sl.GPU], sl)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  GPU\tSLICE\tHOLDER")
	for gpu := range n.Capacity.GPUs {
		slices := byGPU[gpu]
		if len(slices) == 0 {
			fmt.Fprintf(tw, "  %d\twhole\t-\n", gpu)
			continue
		}
		idx := strconv.Itoa(gpu)
		var free []string // profiles in first-seen order
		freeOf := map[string]int{}
		for _, sl := range slices {
			if sl.ReplicaID == "" {
				if freeOf[sl.Profile] == 0 {
					free = append(free, sl.Profile)
				}
				freeOf[sl.Profile]++
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", idx, sl.Profile, sl.ReplicaID)
			idx = ""
		}
		for _, p := range free {
			if freeOf[p] > 1 {
				p = fmt.Sprintf("%d × %s", freeOf[p], p)
			}
			fmt.Fprintf(tw, "  %s\t%s\t<free>\n", idx, p)
			idx = ""
		}
	}
	tw.Flush()
}

func bytesText(b int64) string {
	if b%(1<<30) == 0 {
		return strconv.FormatInt(b>>30, 10) + "Gi"
	}
	return strconv.FormatInt(b, 10)
}

func newNodeCommand(g *globalOptions) *cobra.Command {
	return nodeCommand(newManifestsOptions(g, clock.Real{}))
}

func nodeCommand(o *manifestsOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Act on cluster nodes (fault injection)",
	}
	fail := &cobra.Command{
		Use:   "fail NAME",
		Short: "Make a node fail its health check now",
		Long: `Mark a node failed, as if it had failed its health check: it leaves the node
pool at once and the replicas on it are rescheduled. With the cluster's
NodeRecovery Automatic (the default) capstan replaces the node; with None it
stays in Failure and is reported. NAME is the node name (hyperpod-i-…) or the
instance id (i-…), as capstan get nodes shows.`,
		Example: `  capstan node fail hyperpod-i-0a1b2c3d4e5f60718`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var n nodeapi.NodeView
			if err := o.client().do(cmd.Context(), http.MethodPost, nodeapi.CapstanPath+"nodes/"+url.PathEscape(args[0])+"/fail", nil, &n); err != nil {
				return errors.New(formatAPIError(err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node/%s failed (cluster %s, status %s)\n", n.Name, n.Cluster, n.Status)
			return nil
		},
	}
	o.addFlags(fail)
	cmd.AddCommand(fail)
	return cmd
}

// splitNodeDocuments separates the NodePool and HyperpodNodeClass documents
// of a file (for the node API) from the rest (for the manifests API).
func splitNodeDocuments(data []byte) (nodeDocs, rest []byte) {
	return splitDocumentsBy(data, nodeapi.IsNodeDocument)
}

// splitDocumentsBy separates the documents of a file that match from the
// rest, each half joined again with "---" lines.
func splitDocumentsBy(data []byte, match func([]byte) bool) (matched, rest []byte) {
	var mb, rb bytes.Buffer
	for _, d := range manifestapi.SplitDocuments(data) {
		b := &rb
		if match(d.Text) {
			b = &mb
		}
		if b.Len() > 0 {
			b.WriteString("\n---\n")
		}
		b.Write(d.Text)
	}
	return mb.Bytes(), rb.Bytes()
}

// applyNodeDocuments sends node documents and prints what became of them.
func (o *manifestsOptions) applyNodeDocuments(cmd *cobra.Command, w io.Writer, data []byte) error {
	var res struct {
		Items []struct {
			Kind, Name, Action string
			Warnings           []string
		} `json:"items"`
	}
	if err := o.client().do(cmd.Context(), http.MethodPost, nodeapi.ApplyPath, data, &res); err != nil {
		return errors.New(formatAPIError(err))
	}
	for _, r := range res.Items {
		group := "karpenter.sh"
		if r.Kind == nodeapi.KindNodeClass {
			group = "karpenter.sagemaker.amazonaws.com"
		}
		fmt.Fprintf(w, "%s.%s/%s %s\n", strings.ToLower(r.Kind), group, r.Name, r.Action)
		for _, warn := range r.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s %s: %s\n", r.Kind, r.Name, warn)
		}
	}
	return nil
}
