package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/common/model"
)

// ServePath is where capstan serve lists its dashboards for the console:
// GET ServePath is an Index, GET ServePath/<uid> the dashboard's Grafana
// JSON, byte for byte what `capstan observability dashboards` writes.
const ServePath = "/_capstan/dashboards"

// Index describes the dashboards and the metric store they read.
type Index struct {
	// Datasource is the path of the Prometheus API the panels query.
	Datasource string `json:"datasource"`
	// ScrapeInterval and Retention are the store's: Grafana's
	// $__rate_interval is at least four scrape intervals, and no time range
	// reaches further back than retention.
	ScrapeInterval string       `json:"scrapeInterval"`
	Retention      string       `json:"retention"`
	Dashboards     []IndexEntry `json:"dashboards"`
}

// IndexEntry names one dashboard.
type IndexEntry struct {
	UID   string `json:"uid"`
	Title string `json:"title"`
}

// built is every dashboard's JSON, built once.
var built = sync.OnceValues(func() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range All() {
		dash, err := d.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(dash); err != nil {
			return nil, fmt.Errorf("encode %s: %w", d.File, err)
		}
		out[d.UID] = buf.Bytes()
	}
	return out, nil
})

// Handler serves ServePath for a store at datasource that scrapes every
// scrape and keeps retention.
func Handler(datasource string, scrape, retention time.Duration) http.Handler {
	idx := Index{Datasource: datasource, ScrapeInterval: model.Duration(scrape).String(), Retention: model.Duration(retention).String()}
	for _, d := range All() {
		idx.Dashboards = append(idx.Dashboards, IndexEntry{UID: d.UID, Title: d.Title})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ServePath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(idx)
	})
	mux.HandleFunc("GET "+ServePath+"/{uid}", func(w http.ResponseWriter, r *http.Request) {
		all, err := built()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b, ok := all[r.PathValue("uid")]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "no dashboard " + r.PathValue("uid")})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return mux
}
