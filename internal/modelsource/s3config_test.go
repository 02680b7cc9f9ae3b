package modelsource

// capstan reaches only the storage it is configured for: without an S3
// endpoint an s3 source is refused before anything is sent, and with one
// the credentials come from capstan's settings or the environment's static
// keys, never from a walk of the AWS default chain (instance metadata,
// container credentials, shared profiles).

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/capstan-dev/capstan/internal/testutil"
)

func TestS3WithoutEndpointContactsNothing(t *testing.T) {
	for _, trap := range []struct {
		name      string
		container bool
	}{{"instance metadata", false}, {"container credentials", true}} {
		for _, tt := range []struct {
			name, uri, compression string
		}{
			{"archive", "s3://my-bucket/model.tar.gz", ""},
			{"prefix", "s3://my-bucket/models/custom/", CompressionNone},
		} {
			t.Run(trap.name+"/"+tt.name, func(t *testing.T) {
				conns := testutil.AWSCredentialTrap(t, trap.container)
				f, err := New(Options{CacheDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = f.FetchModelData(context.Background(), tt.uri, tt.compression, "")
				wantReason(t, err, ReasonNotConfigured, tt.uri, "modelSources.s3.endpoint", "--s3-endpoint",
					"modelSources.s3.accessKeyId", "modelSources.s3.secretAccessKey")
				if !errors.Is(err, ErrS3NotConfigured) {
					t.Fatalf("err = %v, want it to wrap ErrS3NotConfigured", err)
				}
				kind, detail := err.(*SourceError).ModelDataProblem()
				if kind != ReasonNotConfigured || strings.Contains(detail, tt.uri) || !strings.Contains(detail, "modelSources.s3.endpoint") {
					t.Fatalf("ModelDataProblem = %q, %q; want NotConfigured and the settings, without the URI the caller names", kind, detail)
				}
				if n := conns.Load(); n != 0 {
					t.Fatalf("%d connections to the credential endpoint; want none", n)
				}
			})
		}
	}
}

func TestManifestS3WithoutEndpointNamesField(t *testing.T) {
	conns := testutil.AWSCredentialTrap(t, false)
	f, err := New(Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Type: TypeS3, Bucket: "models", Region: "us-east-1", Location: "tinyllama", Field: "spec.modelSourceConfig.s3Storage"}
	_, err = f.Fetch(context.Background(), src)
	wantReason(t, err, ReasonNotConfigured, "spec.modelSourceConfig.s3Storage: cannot fetch s3://models/tinyllama/",
		"modelSources.s3.endpoint", "--s3-endpoint", "modelSources.s3.accessKeyId")
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the credential endpoint; want none", n)
	}
}

// TestS3ClientWithoutEndpointIsInert: the client asynchronous inference
// gets without an endpoint refuses every call before sending it.
func TestS3ClientWithoutEndpointIsInert(t *testing.T) {
	conns := testutil.AWSCredentialTrap(t, false)
	c, err := NewS3Client(context.Background(), Options{}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("async"), Key: aws.String("in.json")})
	if !errors.Is(err, ErrS3NotConfigured) || !strings.Contains(err.Error(), "modelSources.s3.endpoint") {
		t.Fatalf("GetObject err = %v, want ErrS3NotConfigured naming modelSources.s3.endpoint", err)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the credential endpoint; want none", n)
	}
}

// TestS3CredentialsWithEndpoint: with an endpoint the requests are signed
// with capstan's keys, else the environment's static keys, else not at all;
// the default chain is never walked.
func TestS3CredentialsWithEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cfgKey     string // modelSources.s3.accessKeyId
		envKey     string // AWS_ACCESS_KEY_ID
		wantSigned string // the access key id the request was signed with; "" = unsigned
	}{
		{"config keys", "cfg-key", "env-key", "cfg-key"},
		{"environment keys", "", "env-key", "env-key"},
		{"no keys", "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conns := testutil.AWSCredentialTrap(t, true)
			if tt.envKey != "" {
				t.Setenv("AWS_ACCESS_KEY_ID", tt.envKey)
				t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
			}
			var mu sync.Mutex
			var auths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				auths = append(auths, r.Header.Get("Authorization"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
			}))
			defer srv.Close()
			o := Options{CacheDir: t.TempDir(), S3Endpoint: srv.URL}
			if tt.cfgKey != "" {
				o.S3AccessKeyID, o.S3SecretAccessKey = tt.cfgKey, "cfg-secret"
			}
			f, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Fetch(context.Background(), Source{Type: TypeS3, Bucket: "models", Location: "m"})
			wantReason(t, err, ReasonAccessDenied, "s3://models/m/", "modelSources.s3.accessKeyId")
			mu.Lock()
			defer mu.Unlock()
			if len(auths) == 0 {
				t.Fatal("the S3 endpoint got no request")
			}
			for _, a := range auths {
				signed := ""
				if i := strings.Index(a, "Credential="); i >= 0 {
					signed, _, _ = strings.Cut(a[i+len("Credential="):], "/")
				}
				if signed != tt.wantSigned {
					t.Fatalf("Authorization %q: signed with %q, want %q", a, signed, tt.wantSigned)
				}
			}
			if n := conns.Load(); n != 0 {
				t.Fatalf("%d connections to the credential endpoint; want none", n)
			}
		})
	}
}
