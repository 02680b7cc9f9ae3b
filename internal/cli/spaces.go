package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// The spaces' kinds (Workspace, WorkspaceTemplate) go to their own API
// group; these helpers are the CLI's side of it.

// splitWorkspaceDocuments separates a file's workspace.jupyter.org
// documents from the rest.
func splitWorkspaceDocuments(data []byte) (wsDocs, rest []byte) {
	return splitDocumentsBy(data, workspace.IsDocument)
}

func workspaceQualified(kind string) string { return strings.ToLower(kind) + "." + workspace.Group }

// applyWorkspaceDocuments sends workspace documents and prints what became
// of them, with the server's warnings.
func (o *manifestsOptions) applyWorkspaceDocuments(cmd *cobra.Command, data []byte, namespace string) error {
	path := manifestapi.WorkspaceApplyPath
	if namespace != "" {
		path += "?namespace=" + url.QueryEscape(namespace)
	}
	var res manifestapi.ApplyResultList
	if err := o.client().do(cmd.Context(), http.MethodPost, path, data, &res); err != nil {
		return errors.New(formatAPIError(err))
	}
	for _, r := range res.Items {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s\n", workspaceQualified(r.Kind), r.Name, r.Action)
		for _, w := range r.Warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s/%s: %s\n", workspaceQualified(r.Kind), r.Name, w)
		}
	}
	return nil
}

// getWorkspaces lists or shows workspaces or templates.
func (o *manifestsOptions) getWorkspaces(cmd *cobra.Command, res manifestapi.Resource, ns, name string, all bool, output string) error {
	c := o.client()
	path := manifestapi.WorkspaceCollectionPath(res, ns)
	if all {
		path = manifestapi.WorkspaceCollectionPath(res, "")
	}
	if name != "" {
		path = manifestapi.WorkspaceObjectPath(res, ns, name)
	}
	var raw json.RawMessage
	if err := c.do(cmd.Context(), http.MethodGet, path, nil, &raw); err != nil {
		return errors.New(formatAPIError(err))
	}
	w := cmd.OutOrStdout()
	switch output {
	case "json", "yaml":
		return writeRaw(w, raw, output)
	case "", "wide", "name":
	default:
		return fmt.Errorf("-o %s: want yaml, json, wide or name", output)
	}
	var items []json.RawMessage
	if name != "" {
		items = []json.RawMessage{raw}
	} else {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("decode list: %w", err)
		}
		items = l.Items
	}
	if len(items) == 0 {
		if all {
			fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for i, it := range items {
		if res.Kind == workspace.KindWorkspaceTemplate {
			var t workspace.WorkspaceTemplate
			if err := json.Unmarshal(it, &t); err != nil {
				return fmt.Errorf("decode template: %w", err)
			}
			if output == "name" {
				fmt.Fprintf(w, "%s/%s\n", workspaceQualified(t.Kind), t.Metadata.Name)
				continue
			}
			if i == 0 {
				fmt.Fprintln(tw, header(all, "NAME", "DISPLAY NAME", "APP", "DEFAULT IMAGE", "AGE"))
			}
			fmt.Fprintln(tw, row(all, t.Metadata.Namespace, t.Metadata.Name, t.Spec.DisplayName, t.Spec.AppType, t.Spec.DefaultImage, o.age(t.Metadata.CreationTimestamp)))
			continue
		}
		var ws workspace.Workspace
		if err := json.Unmarshal(it, &ws); err != nil {
			return fmt.Errorf("decode workspace: %w", err)
		}
		if output == "name" {
			fmt.Fprintf(w, "%s/%s\n", workspaceQualified(ws.Kind), ws.Metadata.Name)
			continue
		}
		cols := []string{"NAME", "DESIRED", "PHASE", "GPU", "NODE", "AGE"}
		if output == "wide" {
			cols = append(cols, "TEMPLATE", "URL")
		}
		if i == 0 {
			fmt.Fprintln(tw, header(all, cols...))
		}
		st := ws.Status
		gpu := "-"
		switch {
		case st.MIGSlice != "":
			gpu = "mig-" + st.MIGSlice
		case st.GPUs > 0:
			gpu = strconv.Itoa(st.GPUs)
		}
		vals := []string{ws.Metadata.Name, ws.Spec.DesiredStatus, orNone(st.Phase), gpu, orNone(st.Node), o.age(ws.Metadata.CreationTimestamp)}
		if output == "wide" {
			tmpl := "<none>"
			if r := ws.Spec.TemplateRef; r != nil {
				tmpl = r.Namespace + "/" + r.Name
			}
			vals = append(vals, tmpl, orNone(st.AccessURL))
		}
		fmt.Fprintln(tw, row(all, append([]string{ws.Metadata.Namespace}, vals...)...))
	}
	return tw.Flush()
}

func header(withNS bool, cols ...string) string {
	if withNS {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	return strings.Join(cols, "\t")
}

// row joins a row's cells; vals[0] is the namespace, shown with withNS.
func row(withNS bool, vals ...string) string {
	if !withNS {
		vals = vals[1:]
	}
	return strings.Join(vals, "\t")
}

// describeWorkspace prints a workspace's spec essentials, status,
// conditions and recent events.
func (o *manifestsOptions) describeWorkspace(cmd *cobra.Command, res manifestapi.Resource, ns, name string) error {
	c := o.client()
	path := manifestapi.WorkspaceObjectPath(res, ns, name)
	var raw json.RawMessage
	if err := c.do(cmd.Context(), http.MethodGet, path, nil, &raw); err != nil {
		return errors.New(formatAPIError(err))
	}
	w := cmd.OutOrStdout()
	if res.Kind == workspace.KindWorkspaceTemplate {
		return writeRaw(w, raw, "yaml")
	}
	var ws workspace.Workspace
	if err := json.Unmarshal(raw, &ws); err != nil {
		return fmt.Errorf("decode workspace: %w", err)
	}
	var evs manifestapi.EventList
	evErr := c.do(cmd.Context(), http.MethodGet, path+"/events", nil, &evs)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	kv := func(indent int, k, v string) { fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), k, v) }
	m, s, st := ws.Metadata, ws.Spec, ws.Status
	kv(0, "Name", m.Name)
	kv(0, "Namespace", m.Namespace)
	kv(0, "Kind", workspace.KindWorkspace)
	kv(0, "API Version", workspace.APIVersion)
	if m.CreationTimestamp != nil {
		kv(0, "Created", fmt.Sprintf("%s (%s ago)", m.CreationTimestamp.UTC().Format(time.RFC3339), o.age(m.CreationTimestamp)))
	}
	kv(0, "Generation", fmt.Sprintf("%d (observed %d)", m.Generation, st.ObservedGeneration))
	fmt.Fprintln(tw, "Spec:")
	kv(1, "Display Name", s.DisplayName)
	kv(1, "Desired Status", s.DesiredStatus)
	if r := s.TemplateRef; r != nil {
		kv(1, "Template", r.Namespace+"/"+r.Name)
	}
	if s.Resources != nil {
		kv(1, "Requests", joinQuantities(s.Resources.Requests))
		if len(s.Resources.Limits) > 0 {
			kv(1, "Limits", joinQuantities(s.Resources.Limits))
		}
	}
	if is := s.IdleShutdown; is != nil && is.Enabled {
		kv(1, "Idle Shutdown", fmt.Sprintf("after %d min without activity", is.IdleTimeoutInMinutes))
	}
	fmt.Fprintln(tw, "Status:")
	kv(1, "Phase", orNone(st.Phase))
	kv(1, "URL", orNone(st.AccessURL))
	kv(1, "Node", orNone(st.Node))
	kv(1, "Instance Type", orNone(st.InstanceType))
	switch {
	case st.MIGSlice != "":
		kv(1, "MIG Slice", st.MIGSlice)
	case st.GPUs > 0:
		kv(1, "GPUs", strconv.Itoa(st.GPUs))
	}
	if st.LastActivity != nil {
		kv(1, "Last Activity", st.LastActivity.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	if len(st.Conditions) > 0 {
		fmt.Fprintln(w, "Conditions:")
		ctw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(ctw, "  TYPE\tSTATUS\tREASON\tMESSAGE")
		for _, c := range st.Conditions {
			fmt.Fprintf(ctw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, orNone(c.Reason), c.Message)
		}
		ctw.Flush()
	}
	o.writeEvents(w, evs.Items, evErr)
	return nil
}
