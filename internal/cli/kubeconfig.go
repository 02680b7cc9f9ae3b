package cli

import (
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

type kubeconfigOptions struct {
	token   string
	context string
	merge   bool
}

func newKubeconfigCommand(g *globalOptions) *cobra.Command {
	o := &kubeconfigOptions{}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for kubectl and client-go against this capstan server",
		Long: `Print a kubeconfig whose one context points kubectl at the capstan server
(--server, CAPSTAN_SERVER), with the admin token (--token, CAPSTAN_TOKEN) as its
bearer token when the server has adminTokens. With --merge, add the context to
your kubeconfig ($KUBECONFIG, else ~/.kube/config) and make it current instead.

  capstan kubeconfig > capstan.kubeconfig && kubectl --kubeconfig capstan.kubeconfig get jsm
  capstan kubeconfig --merge && kubectl get jsm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(g.serverURL())
			if err != nil {
				return err
			}
			if !o.merge {
				out, err := clientcmd.Write(*cfg)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			po := clientcmd.NewDefaultPathOptions()
			cur, err := po.GetStartingConfig()
			if err != nil {
				return fmt.Errorf("read your kubeconfig: %w", err)
			}
			cur.Clusters[o.context] = cfg.Clusters[o.context]
			cur.AuthInfos[o.context] = cfg.AuthInfos[o.context]
			cur.Contexts[o.context] = cfg.Contexts[o.context]
			cur.CurrentContext = o.context
			if err := clientcmd.ModifyConfig(po, *cur, true); err != nil {
				return fmt.Errorf("write your kubeconfig: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %q (server %s) added to %s and made current\n", o.context, cfg.Clusters[o.context].Server, po.GetDefaultFilename())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.token, "token", "", "admin token (one of the server's adminTokens) kubectl sends as its bearer token (env CAPSTAN_TOKEN)")
	f.StringVar(&o.context, "context", "capstan", "name of the context, cluster and user written")
	f.BoolVar(&o.merge, "merge", false, "add the context to your kubeconfig and make it current, instead of printing a kubeconfig")
	return cmd
}

// config is a kubeconfig with one context, o.context, for server.
func (o *kubeconfigOptions) config(server string) (*clientcmdapi.Config, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want an http:// or https:// URL", server)
	}
	if o.context == "" {
		return nil, fmt.Errorf("--context: must not be empty")
	}
	token := o.token
	if token == "" {
		token = os.Getenv("CAPSTAN_TOKEN")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[o.context] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos[o.context] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[o.context] = &clientcmdapi.Context{Cluster: o.context, AuthInfo: o.context, Namespace: "default"}
	cfg.CurrentContext = o.context
	return cfg, nil
}
