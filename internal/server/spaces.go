package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/spaces"
	"github.com/capstan-dev/capstan/internal/store"
)

// newSpaces builds the spaces service on the clusters' node pool.
func newSpaces(st *store.Store, cls *clusters, cat *catalog.Catalog, clk clock.Clock, log *slog.Logger,
	reg prometheus.Registerer, dataDir, url string, resync time.Duration, sb *sandbox.Sandbox) (*spaces.Service, error) {
	return spaces.New(spaces.Options{Store: st, Pool: cls.pool, Catalog: cat, Clusters: spaceOffers{svc: cls.svc, cat: cat},
		Clock: clk, Logger: log, Dir: filepath.Join(dataDir, "spaces"), URL: url, Resync: resync, Registerer: reg, Sandbox: sb})
}

// spaceOffers tells the spaces service what a cluster's instance groups
// offer: their GPUs, and the MIG profiles of their layouts.
type spaceOffers struct {
	svc *hyperpod.Service
	cat *catalog.Catalog
}

func (o spaceOffers) Offers(ctx context.Context, name string) ([]spaces.Offer, error) {
	_, groups, err := o.svc.Cluster(ctx, name)
	var nf *hyperpod.NotFoundError
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("cluster %s: %w", name, manifest.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var out []spaces.Offer
	for _, g := range groups {
		it, err := o.cat.InstanceType(g.InstanceType)
		if err != nil {
			continue
		}
		of := spaces.Offer{InstanceType: g.InstanceType, GPUs: it.GPUCount}
		if g.MIGLayout != "" && it.GPUCount > 0 {
			if gpu, err := o.cat.GPU(it.GPU); err == nil {
				if profiles, err := gpu.Layout(g.MIGLayout); err == nil {
					of.MIGProfiles = profiles
				}
			}
		}
		out = append(out, of)
	}
	return out, nil
}
