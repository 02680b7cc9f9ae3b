package modelsource

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// StartMotoS3 runs moto's standalone S3 server for the test (see
// testutil.StartMotoS3).
func StartMotoS3(t testing.TB) string { return testutil.StartMotoS3(t) }

// testS3 is an SDK client for the moto server, for putting fixtures.
func testS3(t testing.TB, endpoint string) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

func mustBucket(t testing.TB, c *s3.Client, bucket string) {
	t.Helper()
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// put uploads one object; sha256 asks S3 to store a SHA-256 checksum.
func put(t testing.TB, c *s3.Client, bucket, key string, body []byte, sha256 bool) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if sha256 {
		in.ChecksumAlgorithm = types.ChecksumAlgorithmSha256
	}
	if _, err := c.PutObject(context.Background(), in); err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

func del(t testing.TB, c *s3.Client, bucket, key string) {
	t.Helper()
	if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		t.Fatalf("delete s3://%s/%s: %v", bucket, key, err)
	}
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// weights makes n deterministic bytes.
func weights(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}
