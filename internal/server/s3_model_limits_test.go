package server

// The model cache is bounded and cleaned: CreateModel refuses a model.tar.gz
// whose extraction passes modelSources.maxArchiveBytes, or would take the
// cache past modelSources.maxCacheBytes, leaving nothing of it behind; and
// DeleteModel removes an extracted archive once no model or endpoint uses it.

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// modelBucket starts moto with a "models" bucket and returns its URL and a
// put function.
func modelBucket(t *testing.T) (string, func(key string, body []byte)) {
	t.Helper()
	ctx := context.Background()
	motoURL := testutil.StartMotoS3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(motoURL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("models")}); err != nil {
		t.Fatal(err)
	}
	return motoURL, func(key string, body []byte) {
		t.Helper()
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("models"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
}

// incompressible is n bytes that gzip cannot shrink, like model weights.
func incompressible(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// archiveFolder is where the server extracts s3://models/<key>.
func archiveFolder(dataDir, key string) string {
	return filepath.Join(dataDir, "models", "s3-archive", "models", filepath.FromSlash(key))
}

func onDisk(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// partLeftovers lists temporary files and folders left in the model cache.
func partLeftovers(dataDir string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(dataDir, "models"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".capstan-part-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func createArchiveModel(ctx context.Context, p *proc, name, key string) error {
	_, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), ModelDataUrl: aws.String("s3://models/" + key)}})
	return err
}

func TestCreateModelArchiveSizeLimits(t *testing.T) {
	ctx := context.Background()
	motoURL, put := modelBucket(t)
	// 2 MiB of zeros: a 2 KiB gzip bomb for a 1 MiB limit.
	put("bomb/model.tar.gz", orderedTarGz(t, [2]string{"config.json", customConfig}, [2]string{"zeros.bin", string(make([]byte, 2<<20))}))
	// Each within 1 MiB, together past the cache's 1.5 MiB.
	put("a/model.tar.gz", orderedTarGz(t, [2]string{"config.json", customConfig}, [2]string{"w.bin", incompressible(800<<10, 1)}))
	put("b/model.tar.gz", orderedTarGz(t, [2]string{"config.json", customConfig}, [2]string{"w.bin", incompressible(800<<10, 2)}))

	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := filepath.Join(t.TempDir(), "capstan.yaml")
	if err := os.WriteFile(cfg, []byte("modelSources:\n  maxArchiveBytes: 1048576\n  maxCacheBytes: 1572864\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dataDir, "--config", cfg, "--s3-endpoint", motoURL)
	stored := func(name string) bool {
		_, err := p.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String(name)})
		return err == nil
	}

	wantValidation(t, createArchiveModel(ctx, p, "bomb", "bomb/model.tar.gz"),
		"PrimaryContainer.ModelDataUrl: s3://models/bomb/model.tar.gz: the archive expands past 1048576 bytes (1 MiB), "+
			"the limit on one extracted model archive (modelSources.maxArchiveBytes in capstan.yaml), at entry \"zeros.bin\"; nothing of it was kept")
	if stored("bomb") || onDisk(archiveFolder(dataDir, "bomb/model.tar.gz")) {
		t.Fatalf("the refused bomb was stored (%v) or its files kept (%v)", stored("bomb"), onDisk(archiveFolder(dataDir, "bomb/model.tar.gz")))
	}

	if err := createArchiveModel(ctx, p, "a", "a/model.tar.gz"); err != nil {
		t.Fatal(err)
	}
	err := createArchiveModel(ctx, p, "b", "b/model.tar.gz")
	wantValidation(t, err, "PrimaryContainer.ModelDataUrl: s3://models/b/model.tar.gz: extracting the archive would take the model cache past 1572864 bytes (1.5 MiB), "+
		"the limit on the whole model cache (modelSources.maxCacheBytes in capstan.yaml;", `at entry "w.bin"; nothing of it was kept`)
	if strings.Contains(err.Error(), dataDir) {
		t.Fatalf("the answer shows a server path: %v", err)
	}
	if stored("b") || onDisk(archiveFolder(dataDir, "b/model.tar.gz")) {
		t.Fatal("the archive refused for the cache's limit was stored or kept")
	}
	if left := partLeftovers(dataDir); len(left) != 0 {
		t.Fatalf("temporary files left in the model cache: %v", left)
	}

	// Deleting a frees its folder, and b fits.
	if _, err := p.sm.DeleteModel(ctx, &sm.DeleteModelInput{ModelName: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	if onDisk(archiveFolder(dataDir, "a/model.tar.gz")) {
		t.Fatal("DeleteModel left the deleted model's extracted archive")
	}
	if err := createArchiveModel(ctx, p, "b", "b/model.tar.gz"); err != nil {
		t.Fatalf("b once a was deleted: %v", err)
	}
}

func TestDeleteModelRemovesExtractedArchive(t *testing.T) {
	ctx := context.Background()
	motoURL, put := modelBucket(t)
	for _, key := range []string{"shared/model.tar.gz", "served/model.tar.gz", "solo/model.tar.gz"} {
		put(key, orderedTarGz(t, [2]string{"config.json", customConfig}))
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dataDir, "--s3-endpoint", motoURL)
	for _, m := range [][2]string{{"s1", "shared"}, {"s2", "shared"}, {"served", "served"}, {"solo", "solo"}} {
		if err := createArchiveModel(ctx, p, m[0], m[1]+"/model.tar.gz"); err != nil {
			t.Fatal(err)
		}
	}
	deleteModel := func(name string) {
		t.Helper()
		if _, err := p.sm.DeleteModel(ctx, &sm.DeleteModelInput{ModelName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
	shared, served, solo := archiveFolder(dataDir, "shared/model.tar.gz"), archiveFolder(dataDir, "served/model.tar.gz"), archiveFolder(dataDir, "solo/model.tar.gz")

	// Two models, one key, one folder: it goes with the last of them.
	deleteModel("s1")
	if !onDisk(filepath.Join(shared, "config.json")) {
		t.Fatal("DeleteModel s1 removed the folder s2 still uses")
	}
	deleteModel("s2")
	if onDisk(shared) {
		t.Fatal("DeleteModel of the key's last model left its folder")
	}

	// A running endpoint keeps its model's folder.
	if _, err := p.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String("served"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("served"),
			InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String("served"), EndpointConfigName: aws.String("served")}); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "served", smtypes.EndpointStatusInService, 90*time.Second)
	deleteModel("served")
	if !onDisk(filepath.Join(served, "config.json")) {
		t.Fatal("DeleteModel removed the folder of a model a running endpoint serves")
	}
	if _, err := p.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String("served"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"still here?","parameters":{"max_new_tokens":2}}`)}); err != nil {
		t.Fatalf("the endpoint after its model was deleted: %v", err)
	}

	// Once the endpoint is gone, the next DeleteModel collects the folder.
	if _, err := p.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("served")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := p.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("served")})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("endpoint not deleted")
		}
	}
	deleteModel("solo")
	if onDisk(served) || onDisk(solo) {
		t.Fatalf("after the endpoint went: served folder %v, solo folder %v; want both removed", onDisk(served), onDisk(solo))
	}
	if left := partLeftovers(dataDir); len(left) != 0 {
		t.Fatalf("temporary files left in the model cache: %v", left)
	}
}
