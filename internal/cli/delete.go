package cli

import (
	"errors"
	"fmt"
	"net/http"

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
drains and stops the deployment's replicas and removes its endpoint.`,
		Example: `  capstan delete -f deploy/demo.yaml
  capstan delete iec demo
  capstan delete jsm deepseek -n team-a --ignore-not-found`,
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct {
				res       manifestapi.Resource
				ns, name  string
				whereFrom string
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
						res, ok := manifestapi.ResourceForKind(r.Kind)
						if !ok {
							return fmt.Errorf("%s (line %d): kind %q is not served: want InferenceEndpointConfig or JumpStartModel", s.name, r.Line, r.Kind)
						}
						ns := r.Namespace
						if ns == "" {
							ns = namespaceOr(namespace)
						}
						targets = append(targets, target{res: res, ns: ns, name: r.Name, whereFrom: s.name})
					}
				}
			case len(args) >= 2:
				res, err := resolveKind(args[0])
				if err != nil {
					return err
				}
				for _, n := range args[1:] {
					targets = append(targets, target{res: res, ns: namespaceOr(namespace), name: n})
				}
			default:
				return errors.New("delete needs -f FILE|DIR|- or KIND NAME")
			}
			c := o.client()
			var errs []error
			for _, t := range targets {
				err := c.do(cmd.Context(), http.MethodDelete, manifestapi.ObjectPath(t.res, t.ns, t.name), nil, nil)
				switch {
				case err == nil:
					fmt.Fprintf(cmd.OutOrStdout(), "%s %q deleted\n", t.res.GroupResource(), t.name)
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
