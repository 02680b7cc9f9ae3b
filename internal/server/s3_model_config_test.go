package server

// CreateModel refuses a model.tar.gz whose config.json the engine could not
// read (not JSON, or present twice) instead of accepting it and failing when
// an endpoint starts, and its answer shows no server path.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
)

// orderedTarGz builds a gzip tar archive of regular files in the order given
// (modelTarGz's map cannot hold one name twice).
func orderedTarGz(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCreateModelRefusesBadConfigJSON(t *testing.T) {
	ctx := context.Background()
	motoURL, put := modelBucket(t)
	put("badjson/model.tar.gz", orderedTarGz(t, [2]string{"config.json", `{"model_type": "llama", "hidden_size": 2560,`}))
	put("twice/model.tar.gz", orderedTarGz(t, [2]string{"config.json", customConfig}, [2]string{"./config.json", `{"model_type": "gpt2"}`}))
	put("good/model.tar.gz", orderedTarGz(t, [2]string{"config.json", customConfig}))

	dataDir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, dataDir, "--s3-endpoint", motoURL)

	tests := []struct {
		name, uri string
		mentions  []string
	}{
		{"bad-json", "s3://models/badjson/model.tar.gz",
			[]string{"PrimaryContainer.ModelDataUrl: s3://models/badjson/model.tar.gz: config.json is not valid JSON"}},
		{"twice", "s3://models/twice/model.tar.gz",
			[]string{"PrimaryContainer.ModelDataUrl: s3://models/twice/model.tar.gz: the archive has 2 entries for config.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(tc.name),
				PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), ModelDataUrl: aws.String(tc.uri)}})
			wantValidation(t, err, tc.mentions...)
			var ae smithy.APIError
			errors.As(err, &ae)
			t.Logf("CreateModel %s: %s", tc.name, ae.ErrorMessage())
			for _, dir := range []string{dataDir, filepath.Dir(dataDir), os.TempDir() + "/"} {
				if strings.Contains(ae.ErrorMessage(), dir) {
					t.Fatalf("CreateModel's answer shows the server path %s: %s", dir, ae.ErrorMessage())
				}
			}
			if _, err := p.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String(tc.name)}); err == nil {
				t.Fatalf("refused model %s was stored", tc.name)
			}
			key := strings.TrimPrefix(tc.uri, "s3://models/")
			if _, err := os.Lstat(filepath.Join(dataDir, "models", "s3-archive", "models", key)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused archive was kept in the model cache: %v", err)
			}
		})
	}

	// The same server still takes a good archive.
	if _, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("good"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), ModelDataUrl: aws.String("s3://models/good/model.tar.gz")}}); err != nil {
		t.Fatal(err)
	}
}
