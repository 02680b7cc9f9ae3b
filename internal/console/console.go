// Package console serves capstan's web console: static assets built from
// web/console (Preact, uPlot, aws4fetch; `npm run build` there) and embedded
// in the binary, plus the one document the console cannot get from the
// public APIs — how to talk to this server (config.json). Everything the
// console shows or changes goes through the same APIs as the CLI and the AWS
// SDKs, signed the same way.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Path is where the console is mounted.
const Path = "/console/"

//go:embed all:dist
var dist embed.FS

// Options describe the server to the console.
type Options struct {
	// Region is the SigV4 region the console signs for.
	Region string
	// AccountID is the account in the ARNs the console writes (the cluster
	// wizard's IAM roles and EKS cluster).
	AccountID string
	// SigV4 is true when the AWS APIs require signed requests: the console
	// asks for an access key and signs its calls.
	SigV4 bool
	// AdminToken is true when the manifests and node APIs require a bearer
	// token: the console asks for one.
	AdminToken bool
	// DevClock says the server runs on a clock that `capstan clock` moves.
	DevClock bool
	// Clock is the server's clock; the console shows plans' time left by it.
	Clock clock.Clock
}

// Config is GET /console/config.json.
type Config struct {
	Region    string     `json:"region"`
	AccountID string     `json:"accountId"`
	Auth      AuthConfig `json:"auth"`
	DevClock  bool       `json:"devClock"`
	Now       time.Time  `json:"now"`
}

// AuthConfig says which credentials the console must ask for.
type AuthConfig struct {
	SigV4      bool `json:"sigv4"`
	AdminToken bool `json:"adminToken"`
}

// securityHeaders keep the console's pages to their own origin: scripts and
// styles only from the embedded assets, no framing.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; " +
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// Handler serves the console under Path.
func Handler(o Options) http.Handler {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	root, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees dist
	}
	index, err := fs.ReadFile(root, "index.html")
	if err != nil {
		panic("console: internal/console/dist has no index.html; run `npm run build` in web/console")
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		rel := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Path, "/"))
		rel = strings.TrimPrefix(rel, "/")
		switch {
		case rel == "config.json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(Config{Region: o.Region, AccountID: o.AccountID, DevClock: o.DevClock, Now: o.Clock.Now().UTC(),
				Auth: AuthConfig{SigV4: o.SigV4, AdminToken: o.AdminToken}})
		case strings.HasPrefix(rel, "assets/"):
			// Vite names assets by their content's hash.
			if _, err := fs.Stat(root, rel); err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + rel
			files.ServeHTTP(w, r2)
		default:
			// Every other path is a page of the single-page app.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(index)
		}
	})
}

// WantsConsole reports whether a request to the server's root comes from a
// browser (a GET that accepts HTML), which is sent to the console; API
// clients' requests to / are the AWS protocols' and are left alone.
func WantsConsole(r *http.Request) bool {
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.Header.Get("X-Amz-Target") == "" && strings.Contains(r.Header.Get("Accept"), "text/html")
}
