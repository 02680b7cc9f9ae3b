package endpoint

import (
	"github.com/capstan-dev/capstan/internal/engines"

	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capstan-dev/capstan/internal/store"
)

// fakeCache is a ModelSource and ModelDataCache over real folders: a fetch
// of s3://b/<key> makes <root>/<key>/config.json; RemoveUnusedModelData
// removes every such folder that inUse does not name. beforeReturn, when
// set, runs inside FetchModelData once the folder is there.
type fakeCache struct {
	root string

	mu           sync.Mutex
	fetches      int
	inUse        [][]string // what each RemoveUnusedModelData was given
	beforeReturn func(dir string)
}

var (
	_ ModelSource    = (*fakeCache)(nil)
	_ ModelDataCache = (*fakeCache)(nil)
)

func (f *fakeCache) FetchModelData(_ context.Context, uri, _ string, _ engines.ModelFormat) (string, string, error) {
	dir := filepath.Join(f.root, strings.TrimPrefix(uri, "s3://b/"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644); err != nil {
		return "", "", err
	}
	f.mu.Lock()
	f.fetches++
	hook := f.beforeReturn
	f.beforeReturn = nil
	f.mu.Unlock()
	if hook != nil {
		hook(dir)
	}
	return dir, "", nil
}

func (f *fakeCache) RemoveUnusedModelData(_ context.Context, inUse []string) ([]string, error) {
	f.mu.Lock()
	f.inUse = append(f.inUse, slices.Clone(inUse))
	f.mu.Unlock()
	ents, err := os.ReadDir(f.root)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		dir := filepath.Join(f.root, e.Name())
		if !slices.Contains(inUse, dir) {
			if err := os.RemoveAll(dir); err != nil {
				return removed, err
			}
			removed = append(removed, dir)
		}
	}
	return removed, nil
}

// DeleteModel removes a fetched folder once the last model of its S3 key
// is deleted, and keeps it while another model of that key or an endpoint
// uses it.
func TestDeleteModelRemovesUnusedModelData(t *testing.T) {
	e := newEnv(t, true, 4)
	cache := &fakeCache{root: t.TempDir()}
	e.svc.SetModelSource(cache, 0)
	create := func(name, key string) string {
		t.Helper()
		m, err := e.svc.CreateModel(e.ctx, Model{Name: name, PrimaryContainer: &Container{ModelDataUrl: "s3://b/" + key}})
		if err != nil {
			t.Fatal(err)
		}
		return m.ModelDir
	}
	del := func(name string) {
		t.Helper()
		if err := e.svc.DeleteModel(e.ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	present := func(dir string) bool { return modelDirPresent(dir) }

	shared := create("a1", "shared.tar.gz")
	if again := create("a2", "shared.tar.gz"); again != shared {
		t.Fatalf("one key, two folders: %s, %s", shared, again)
	}
	served := create("served", "served.tar.gz")
	solo := create("solo", "solo.tar.gz")
	e.config("c", "served", "ml.g5.xlarge", 1)
	if _, err := e.svc.CreateEndpoint(e.ctx, "ep", "c", nil); err != nil {
		t.Fatal(err)
	}

	del("a1")
	if !present(shared) {
		t.Fatal("DeleteModel a1 removed the folder model a2 still uses")
	}
	if got := cache.inUse[len(cache.inUse)-1]; !slices.Contains(got, shared) || !slices.Contains(got, served) {
		t.Fatalf("folders in use = %v; want a2's and the endpoint's", got)
	}
	del("a2")
	if present(shared) {
		t.Fatal("DeleteModel of the last model of the key left its folder")
	}
	del("served")
	if !present(served) {
		t.Fatal("DeleteModel removed the folder of a model an endpoint runs")
	}
	if !present(solo) {
		t.Fatal("a model's folder was removed while it is stored")
	}
	// With the endpoint gone, the next DeleteModel collects the folder too.
	if err := e.svc.store.Update(func(tx *store.Tx) error { return tx.Delete(KindEndpoint, "ep") }); err != nil {
		t.Fatal(err)
	}
	del("solo")
	if present(served) || present(solo) {
		t.Fatalf("after the endpoint went: served %v, solo %v; want both removed", present(served), present(solo))
	}
	if err := e.svc.DeleteModel(e.ctx, "solo"); !IsNotFound(err) {
		t.Fatalf("DeleteModel of a deleted model = %v", err)
	}
}

// A removal that falls between CreateModel's fetch and its store step
// takes the folder; CreateModel sees it and fetches again, so the stored
// model never names a missing folder.
func TestCreateModelRefetchesFolderRemovedMeanwhile(t *testing.T) {
	e := newEnv(t, true, 4)
	cache := &fakeCache{root: t.TempDir()}
	e.svc.SetModelSource(cache, 0)
	if _, err := e.svc.CreateModel(e.ctx, Model{Name: "other", PrimaryContainer: &Container{ModelDataUrl: "s3://b/other.tar.gz"}}); err != nil {
		t.Fatal(err)
	}
	cache.beforeReturn = func(string) {
		// The folder is fetched but "late" is not stored yet: deleting
		// another model now removes it as unused.
		if err := e.svc.DeleteModel(context.Background(), "other"); err != nil {
			t.Error(err)
		}
	}
	before := cache.fetches
	m, err := e.svc.CreateModel(e.ctx, Model{Name: "late", PrimaryContainer: &Container{ModelDataUrl: "s3://b/late.tar.gz"}})
	if err != nil {
		t.Fatal(err)
	}
	if !modelDirPresent(m.ModelDir) || cache.fetches-before != 2 {
		t.Fatalf("stored model's folder present %v after %d fetches; want present after 2", modelDirPresent(m.ModelDir), cache.fetches-before)
	}
	got, err := e.svc.GetModel(e.ctx, "late")
	if err != nil || got.ModelDir != m.ModelDir {
		t.Fatalf("GetModel = %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(cache.root, "other.tar.gz")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted model's folder: %v", err)
	}
}
