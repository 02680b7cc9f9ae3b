package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

func newGetCommand(g *globalOptions) *cobra.Command {
	return getCommand(newManifestsOptions(g, clock.Real{}))
}

func getCommand(o *manifestsOptions) *cobra.Command {
	var namespace, output, clusterName string
	var all bool
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List manifests or show one, with their status",
		Long: `Show InferenceEndpointConfigs or JumpStartModels and their status. KIND is the
kind, plural, singular or short name: inferenceendpointconfig (iec) or
jumpstartmodel (jsm). Columns: NAME, STATE, REPLICAS (ready/desired), ENDPOINT
(the SageMaker endpoint name), AGE; -o wide adds INSTANCE TYPE, MODEL and URL.
-o yaml and -o json print the stored objects with their status.

KIND may also be nodes (no), clusters, nodepools (np) or hyperpodnodeclasses
(nodeclass): the HyperPod clusters' nodes with their capacity type, status,
GPUs allocated, replicas, price and age (--cluster narrows them to one
cluster), the clusters with their groups' current/target counts, and the
applied Karpenter NodePools and HyperpodNodeClasses.

KIND may also be workspaces (ws, spaces) or workspacetemplates (wst): the
spaces, with their desired status, phase, GPU or MIG slice and node (-o wide
adds the template and URL), and their templates.`,
		Example: `  capstan get iec
  capstan get jsm deepseek -o yaml
  capstan get inferenceendpointconfigs -A -o wide
  capstan get nodes --cluster ml-cluster
  capstan get clusters
  capstan get nodepools
  capstan get workspaces -o wide`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if k, ok := resolveNodeKind(args[0]); ok {
				switch output {
				case "", "yaml", "json":
				default:
					return fmt.Errorf("-o %s: want yaml or json", output)
				}
				name := ""
				if len(args) == 2 {
					name = args[1]
				}
				return o.getNodeKind(cmd, k, name, clusterName, output)
			}
			if res, ok := manifestapi.ResolveWorkspaceKind(args[0]); ok {
				if all && (len(args) == 2 || namespace != "") {
					return errors.New("-A lists every namespace; it cannot be used with a NAME or -n")
				}
				name := ""
				if len(args) == 2 {
					name = args[1]
				}
				return o.getWorkspaces(cmd, res, namespaceOr(namespace), name, all, output)
			}
			res, err := resolveKind(args[0])
			if err != nil {
				return err
			}
			switch output {
			case "", "wide", "yaml", "json", "name":
			default:
				return fmt.Errorf("-o %s: want yaml, json, wide or name", output)
			}
			if all && len(args) == 2 {
				return errors.New("-A lists every namespace; it cannot be used with a NAME")
			}
			if all && namespace != "" {
				return errors.New("-A and -n cannot be used together")
			}
			ns := namespaceOr(namespace)
			c := o.client()
			var raw json.RawMessage
			if len(args) == 2 {
				err = c.do(cmd.Context(), http.MethodGet, manifestapi.ObjectPath(res, ns, args[1]), nil, &raw)
			} else {
				lns := ns
				if all {
					lns = ""
				}
				err = c.do(cmd.Context(), http.MethodGet, manifestapi.CollectionPath(res, lns), nil, &raw)
			}
			if err != nil {
				return errors.New(formatAPIError(err))
			}
			w := cmd.OutOrStdout()
			if output == "json" || output == "yaml" {
				return writeRaw(w, raw, output)
			}
			var objs []manifest.Object
			if len(args) == 2 {
				obj, err := decodeObject(raw)
				if err != nil {
					return err
				}
				objs = append(objs, obj)
			} else {
				var l struct {
					Items []json.RawMessage `json:"items"`
				}
				if err := json.Unmarshal(raw, &l); err != nil {
					return fmt.Errorf("decode list: %w", err)
				}
				for _, it := range l.Items {
					obj, err := decodeObject(it)
					if err != nil {
						return err
					}
					objs = append(objs, obj)
				}
			}
			if len(objs) == 0 {
				if all {
					fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", ns)
				}
				return nil
			}
			if output == "name" {
				for _, obj := range objs {
					fmt.Fprintf(w, "%s/%s\n", res.GroupResource(), obj.GetMeta().Name)
				}
				return nil
			}
			return o.printTable(w, objs, all, output == "wide")
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace (default \"default\")")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list across every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml, json, wide or name")
	cmd.Flags().StringVar(&clusterName, "cluster", "", "with get nodes: only this cluster's nodes")
	o.addFlags(cmd)
	return cmd
}

// summary is what the table and describe show of either kind.
type summary struct {
	model, instanceType, sageMakerEndpoint string
	specReplicas                           int32
	autoscaled                             bool
}

func summarize(obj manifest.Object) summary {
	var s summary
	switch x := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		s.model = x.Spec.ModelName
		s.instanceType = x.Spec.InstanceType
		if s.instanceType == "" {
			s.instanceType = strings.Join(x.Spec.InstanceTypes, ",")
		}
		s.sageMakerEndpoint = x.Spec.EndpointName
		s.autoscaled = x.Spec.AutoScalingSpec != nil
		if x.Spec.Replicas != nil {
			s.specReplicas = *x.Spec.Replicas
		}
	case *manifest.JumpStartModel:
		if x.Spec.Model != nil {
			s.model = x.Spec.Model.ModelID
		}
		if x.Spec.Server != nil {
			s.instanceType = x.Spec.Server.InstanceType
		}
		if x.Spec.SageMakerEndpoint != nil {
			s.sageMakerEndpoint = x.Spec.SageMakerEndpoint.Name
		}
		s.autoscaled = x.Spec.AutoScalingSpec != nil
		if x.Spec.Replicas != nil {
			s.specReplicas = *x.Spec.Replicas
		}
	}
	return s
}

// desiredReplicas is spec.replicas, except that for an autoscaled object
// the controller has seen it is the replica count it runs now (status has
// no field for the autoscaler's target, and the running count follows it).
func desiredReplicas(obj manifest.Object) int32 {
	st, s := obj.GetStatus(), summarize(obj)
	if s.autoscaled && st.ObservedGeneration > 0 {
		return st.Replicas
	}
	return s.specReplicas
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func (o *manifestsOptions) printTable(w io.Writer, objs []manifest.Object, withNS, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var hdr []string
	if withNS {
		hdr = append(hdr, "NAMESPACE")
	}
	hdr = append(hdr, "NAME", "STATE", "REPLICAS", "ENDPOINT", "AGE")
	if wide {
		hdr = append(hdr, "INSTANCE TYPE", "MODEL", "URL")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, obj := range objs {
		m, st, s := obj.GetMeta(), obj.GetStatus(), summarize(obj)
		var row []string
		if withNS {
			row = append(row, m.Namespace)
		}
		row = append(row, m.Name, orNone(string(st.State)),
			strconv.Itoa(int(st.ReadyReplicas))+"/"+strconv.Itoa(int(desiredReplicas(obj))),
			orNone(s.sageMakerEndpoint), o.age(m.CreationTimestamp))
		if wide {
			url := ""
			if st.Endpoints != nil {
				url = st.Endpoints.URL
			}
			row = append(row, orNone(s.instanceType), orNone(s.model), orNone(url))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// writeRaw prints an API answer as indented JSON or as YAML.
func writeRaw(w io.Writer, raw json.RawMessage, output string) error {
	if output == "yaml" {
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return fmt.Errorf("format YAML: %w", err)
		}
		_, err = w.Write(y)
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("format JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
