package operator

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

func TestSelfSign(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	caPEM, err := selfSign(dir, "capstan-operator-webhook.capstan-system", now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("the written pair does not load: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the CA is not PEM")
	}
	// The API server dials the Service by this name.
	for _, host := range []string{"capstan-operator-webhook.capstan-system.svc", "capstan-operator-webhook.capstan-system.svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, CurrentTime: now.Add(24 * time.Hour)}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.capstan-system.svc", Roots: roots, CurrentTime: now}); err == nil {
		t.Error("the certificate verifies for another service")
	}
	if _, err := selfSign(dir, "no-namespace", now); err == nil {
		t.Error("a service without a namespace was accepted")
	}
}
