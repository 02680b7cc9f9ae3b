package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

func newApplyCommand(g *globalOptions) *cobra.Command {
	return applyCommand(newManifestsOptions(g, clock.Real{}))
}

func applyCommand(o *manifestsOptions) *cobra.Command {
	var files []string
	var namespace string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...]",
		Short: "Create or update InferenceEndpointConfig, JumpStartModel, Workspace, NodePool and HyperpodNodeClass manifests",
		Long: `Send manifests to capstan serve, which validates and stores them and rolls out
any change. -f takes a file (YAML or JSON, several documents separated by ---), a
directory (every *.yaml, *.yml and *.json in it, in name order) or - for stdin,
and may be repeated. Each file is applied as a whole: when any of its documents
is invalid nothing in that file is stored, and every field error is printed with
its path. Re-applying an unchanged manifest changes nothing. Karpenter NodePool
(karpenter.sh/v1) and HyperpodNodeClass (karpenter.sagemaker.amazonaws.com/v1)
documents go to the node API and are applied before the file's other documents;
Workspace and WorkspaceTemplate (workspace.jupyter.org/v1alpha1) documents go to
the spaces API, first of all.`,
		Example: `  capstan apply -f deploy/demo.yaml
  capstan apply -f deploy/ -n team-a
  cat demo.yaml | capstan apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("apply needs at least one -f FILE|DIR|-")
			}
			srcs, err := readSources(files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			path := manifestapi.ApplyPath
			if namespace != "" {
				path += "?namespace=" + url.QueryEscape(namespace)
			}
			c := o.client()
			var errs []error
			for _, s := range srcs {
				// NodePools and HyperpodNodeClasses go to the node API; a
				// file holding both kinds is applied as two halves.
				// Workspaces and their templates go to their own API group.
				wsDocs, rest := splitWorkspaceDocuments(s.data)
				if len(wsDocs) > 0 {
					if err := o.applyWorkspaceDocuments(cmd, wsDocs, namespace); err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
						continue
					}
					if len(bytes.TrimSpace(rest)) == 0 {
						continue
					}
					s.data = rest
				}
				nodeDocs, rest := splitNodeDocuments(s.data)
				if len(nodeDocs) > 0 {
					if err := o.applyNodeDocuments(cmd, cmd.OutOrStdout(), nodeDocs); err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
						continue
					}
					if len(bytes.TrimSpace(rest)) == 0 {
						continue
					}
					s.data = rest
				}
				var res manifestapi.ApplyResultList
				if err := c.do(cmd.Context(), http.MethodPost, path, s.data, &res); err != nil {
					errs = append(errs, fmt.Errorf("%s: %s", s.name, formatAPIError(err)))
					continue
				}
				for _, r := range res.Items {
					fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s\n", qualified(r.Kind), r.Name, r.Action)
					for _, w := range r.Warnings {
						fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s/%s: %s\n", qualified(r.Kind), r.Name, w)
					}
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory or - for stdin (repeatable)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace for manifests that do not name one (default \"default\")")
	o.addFlags(cmd)
	return cmd
}

// qualified is kubectl's resource.group spelling of a kind.
func qualified(kind string) string {
	if r, ok := manifestapi.ResourceForKind(kind); ok {
		return r.GroupResource()
	}
	return strings.ToLower(kind)
}

// source is one file's bytes, named for error messages.
type source struct {
	name string
	data []byte
}

// manifestExts are the file names a directory contributes.
var manifestExts = []string{".yaml", ".yml", ".json"}

// readSources expands every -f argument: "-" is stdin (once), a directory
// gives its manifest files in name order (not recursively), anything else is
// read as a file.
func readSources(args []string, stdin io.Reader) ([]source, error) {
	var out []source
	usedStdin := false
	for _, a := range args {
		if a == "-" {
			if usedStdin {
				return nil, errors.New("-f - given twice")
			}
			usedStdin = true
			b, err := io.ReadAll(io.LimitReader(stdin, manifest.MaxManifestBytes+1))
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			out = append(out, source{name: "<stdin>", data: b})
			continue
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", a, err)
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(a)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", a, err)
			}
			out = append(out, source{name: a, data: b})
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", a, err)
		}
		n := 0
		for _, e := range ents { // ReadDir sorts by name
			if e.IsDir() || !slices.Contains(manifestExts, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			p := filepath.Join(a, e.Name())
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", p, err)
			}
			out = append(out, source{name: p, data: b})
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("-f %s: no *.yaml, *.yml or *.json files in the directory", a)
		}
	}
	return out, nil
}
