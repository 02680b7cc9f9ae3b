package manifestapi

import (
	"net/http"

	"github.com/capstan-dev/capstan/internal/clock"
)

// WithServerDate sets the Date header of h's answers from clk, the
// server's clock (the HTTP server would write its wall time). The CLI
// measures AGE columns from it: under --dev-clock the server's time is not
// the wall clock of either machine. capstan serve wraps the APIs the CLI
// reads (manifests, nodes, workspaces) and not the AWS APIs, whose SigV4
// check stays on wall time and whose SDKs correct their signing clock by
// Date.
func WithServerDate(h http.Handler, clk clock.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", clk.Now().UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	})
}
