package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

func newDeleteCommand(g *globalOptions) *cobra.Command {
	return deleteCommand(newManifestsOptions(g, clock.Real{}))
}

func deleteCommand(o *manifestsOptions) *cobra.Command {
	var files []string
	var namespace string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete (-f FILE|DIR|- | KIND NAME...)",
		Short: "Delete manifests named in files or by kind and name",
		Long: `Delete InferenceEndpointConfigs and JumpStartModels: those named in -f files
(only kind, metadata.name and metadata.namespace are read, so a file that no
longer validates still works), or KIND NAME... in -n NAMESPACE. The server
drains and stops the deployment's replicas and removes its endpoint.
NodePools and HyperpodNodeClasses (nodepool, hyperpodnodeclass) are deleted the
same ways; a cluster's nodes stay until the node autoscaler consolidates them.
Workspaces (ws) stop and lose their files; a WorkspaceTemplate (wst) that
workspaces still use is refused.`,
		Example: `  capstan delete -f deploy/demo.yaml
  capstan delete iec demo
  capstan delete jsm deepseek -n team-a --ignore-not-found
  capstan delete nodepool inference`,
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct {
				path, label string // the object's URL path; what the output calls it
				name        string
				whereFrom   string
			}
			manifestTarget := func(res manifestapi.Resource, ns, name, from string) target {
				return target{path: manifestapi.ObjectPath(res, ns, name), label: res.GroupResource(), name: name, whereFrom: from}
			}
			nodeTarget := func(k nodeKind, name, from string) target {
				return target{path: k.path + "/" + url.PathEscape(name), label: k.label(), name: name, whereFrom: from}
			}
			workspaceTarget := func(res manifestapi.Resource, ns, name, from string) target {
				return target{path: manifestapi.WorkspaceObjectPath(res, ns, name), label: workspaceQualified(res.Kind), name: name, whereFrom: from}
			}
			var targets []target
			switch {
			case len(files) > 0 && len(args) > 0:
				return errors.New("give either -f or KIND NAME, not both")
			case len(files) > 0:
				srcs, err := readSources(files, cmd.InOrStdin())
				if err != nil {
					return err
				}
				for _, s := range srcs {
					refs, err := manifestapi.ReadRefs(s.data)
					if err != nil {
						return fmt.Errorf("%s: %w", s.name, err)
					}
					for _, r := range refs {
						if k, ok := nodeKindOf(r.Kind); ok {
							targets = append(targets, nodeTarget(k, r.Name, s.name))
							continue
						}
						if res, ok := manifestapi.ResolveWorkspaceKind(r.Kind); ok && res.Kind == r.Kind {
							ns := r.Namespace
							if ns == "" {
								ns = namespaceOr(namespace)
							}
							targets = append(targets, workspaceTarget(res, ns, r.Name, s.name))
							continue
						}
						res, ok := manifestapi.ResourceForKind(r.Kind)
						if !ok {
							return fmt.Errorf("%s (line %d): kind %q is not served: want InferenceEndpointConfig, JumpStartModel, Workspace, WorkspaceTemplate, NodePool or HyperpodNodeClass", s.name, r.Line, r.Kind)
						}
						ns := r.Namespace
						if ns == "" {
							ns = namespaceOr(namespace)
						}
						targets = append(targets, manifestTarget(res, ns, r.Name, s.name))
					}
				}
			case len(args) >= 2:
				if k, ok := resolveNodeKind(args[0]); ok {
					if k.name == "node" || k.name == "cluster" {
						return fmt.Errorf("delete %s: use aws sagemaker batch-delete-cluster-nodes / delete-cluster", k.name)
					}
					for _, n := range args[1:] {
						targets = append(targets, nodeTarget(k, n, ""))
					}
					break
				}
				if res, ok := manifestapi.ResolveWorkspaceKind(args[0]); ok {
					for _, n := range args[1:] {
						targets = append(targets, workspaceTarget(res, namespaceOr(namespace), n, ""))
					}
					break
				}
				res, err := resolveKind(args[0])
				if err != nil {
					return err
				}
				for _, n := range args[1:] {
					targets = append(targets, manifestTarget(res, namespaceOr(namespace), n, ""))
				}
			default:
				return errors.New("delete needs -f FILE|DIR|- or KIND NAME")
			}
			c := o.client()
			var errs []error
			for _, t := range targets {
				err := c.do(cmd.Context(), http.MethodDelete, t.path, nil, nil)
				switch {
				case err == nil:
					fmt.Fprintf(cmd.OutOrStdout(), "%s %q deleted\n", t.label, t.name)
				case ignoreNotFound && isNotFound(err):
				case t.whereFrom != "":
					errs = append(errs, fmt.Errorf("%s: %s", t.whereFrom, formatAPIError(err)))
				default:
					errs = append(errs, errors.New(formatAPIError(err)))
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory or - for stdin (repeatable)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace for names given on the command line and manifests that do not name one (default \"default\")")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat an object that does not exist as deleted")
	o.addFlags(cmd)
	return cmd
}
