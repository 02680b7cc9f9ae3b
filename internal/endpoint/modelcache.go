package endpoint

import (
	"github.com/capstan-dev/capstan/internal/engines"

	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/capstan-dev/capstan/internal/store"
)

// A model's fetched folder (Model.ModelDir) is removed from the model cache
// once nothing uses it: DeleteModel scans the stored models and endpoints
// for the folders they use and has the cache remove every other one
// (ModelDataCache). Two models of one S3 key share one folder, so the
// folder goes with the last of them; an endpoint keeps the folders of its
// serving and pending deployments even after their models are deleted (they
// are collected by a later DeleteModel once the endpoint is gone).
//
// CreateModel fetches first and stores after, so a removal could fall in
// between and take the folder the new model is about to name. dataMu makes
// the scan-and-remove and CreateModel's store step exclusive, and
// dataEpoch counts removals: a CreateModel that sees a removal happened
// during its fetch, and its folder gone, fetches again.

// maxModelDataFetches bounds how often CreateModel fetches a folder that
// removals keep taking while it is fetched.
const maxModelDataFetches = 3

// fetchAndStoreModel fetches m's artifacts (resolveModelData) and stores m,
// fetching again when its folder was removed in between.
func (s *Service) fetchAndStoreModel(ctx context.Context, m *Model) error {
	for attempt := 1; ; attempt++ {
		s.dataMu.Lock()
		epoch := s.dataEpoch
		s.dataMu.Unlock()
		m.ModelDir, m.ResolvedModel = "", ""
		if err := s.resolveModelData(ctx, m); err != nil {
			return err
		}
		s.dataMu.Lock()
		if m.ModelDir != "" && s.dataEpoch != epoch && !modelDirPresent(m.ModelDir) {
			s.dataMu.Unlock()
			if attempt < maxModelDataFetches {
				continue
			}
			return fmt.Errorf("model %s: its model data was removed from the model cache while it was fetched, %d times; retry", m.Name, attempt)
		}
		err := s.storeModel(*m)
		s.dataMu.Unlock()
		return err
	}
}

// modelDirPresent reports whether dir still holds its model: config.json,
// or a .gguf file.
func modelDirPresent(dir string) bool {
	if fi, err := os.Stat(filepath.Join(dir, "config.json")); err == nil && fi.Mode().IsRegular() {
		return true
	}
	_, err := engines.GGUFFile(dir)
	return err == nil
}

// removeUnusedModelData has the model cache remove the fetched folders no
// stored model or endpoint uses. Failures are logged: the caller's change
// is made either way, and a later call tries again.
func (s *Service) removeUnusedModelData(ctx context.Context) {
	if s.modelCache == nil {
		return
	}
	ctx = context.WithoutCancel(ctx) // a client that hangs up does not cut the cleanup short
	s.dataMu.Lock()
	defer s.dataMu.Unlock()
	var inUse []string
	if err := s.store.View(func(tx *store.Tx) error {
		var err error
		inUse, err = modelDirsInUse(tx)
		return err
	}); err != nil {
		s.log.Warn("model cache: not removing unused model data", "err", err)
		return
	}
	removed, err := s.modelCache.RemoveUnusedModelData(ctx, inUse)
	if len(removed) > 0 {
		s.dataEpoch++
		s.log.Info("model cache: removed model data no model or endpoint uses", "dirs", removed)
	}
	if err != nil {
		s.log.Warn("model cache: unused model data not removed", "err", err)
	}
}

// modelDirsInUse lists the fetched folders of the stored models and of
// every endpoint's serving and pending deployment.
func modelDirsInUse(tx *store.Tx) ([]string, error) {
	models, err := store.List[Model](tx, KindModel)
	if err != nil {
		return nil, err
	}
	eps, err := store.List[Endpoint](tx, KindEndpoint)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range models {
		if m.ModelDir != "" {
			dirs = append(dirs, m.ModelDir)
		}
	}
	for _, ep := range eps {
		for _, d := range []*Deployment{ep.Current, ep.Pending} {
			if d == nil {
				continue
			}
			for _, v := range d.Variants {
				if v.ModelDir != "" {
					dirs = append(dirs, v.ModelDir)
				}
			}
		}
	}
	return dirs, nil
}
