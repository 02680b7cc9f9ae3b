package modelsource

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// StartMotoS3 runs moto's standalone server (a real S3-compatible HTTP
// server) on a free port for the duration of the test and returns its
// endpoint URL. It uses `moto_server`, or `python3 -m moto.server` when that
// is not on PATH. (Proposed for internal/testutil.)
func StartMotoS3(t testing.TB) string {
	t.Helper()
	port := testutil.FreePort(t)
	args := []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port)}
	var cmd *exec.Cmd
	if p, err := exec.LookPath("moto_server"); err == nil {
		cmd = exec.Command(p, args...)
	} else {
		cmd = exec.Command("python3", append([]string{"-m", "moto.server"}, args...)...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto S3 server (pip install 'moto[server]'): %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	select {
	case <-done:
		t.Fatalf("moto server exited at once:\n%s", out.String())
	default:
	}
	testutil.WaitTCP(t, addr, 30*time.Second)
	return "http://" + addr
}

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
