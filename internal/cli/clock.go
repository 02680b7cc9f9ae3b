package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newClockCommand(g *globalOptions) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "clock",
		Short: "Read or move the clock of a capstan serve started with --dev-clock",
	}
	cmd.PersistentFlags().StringVar(&token, "token", "", "admin token (one of the server's adminTokens) sent as 'Authorization: Bearer' (env CAPSTAN_TOKEN)")
	cmd.AddCommand(&cobra.Command{
		Use:   "now",
		Short: "Print the server's current time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clockCall(cmd, g, token, http.MethodGet, nil)
		},
	}, &cobra.Command{
		Use:   "advance DURATION",
		Short: "Move the server's clock forward, e.g. 168h",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := time.ParseDuration(args[0]); err != nil {
				return fmt.Errorf("duration %q: %w", args[0], err)
			}
			body, _ := json.Marshal(map[string]string{"advance": args[0]})
			return clockCall(cmd, g, token, http.MethodPost, body)
		},
	})
	return cmd
}

func clockCall(cmd *cobra.Command, g *globalOptions, token, method string, body []byte) error {
	url := strings.TrimRight(g.serverURL(), "/") + "/_capstan/clock"
	req, err := http.NewRequestWithContext(cmd.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token = adminToken(token); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("reach capstan at %s: %w", g.serverURL(), err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		Now     string `json:"now"`
		Offset  string `json:"offset"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode != http.StatusOK {
		msg := out.Message
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return fmt.Errorf("server answered %s: %s", resp.Status, msg)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s (offset %s)\n", out.Now, out.Offset)
	return nil
}
