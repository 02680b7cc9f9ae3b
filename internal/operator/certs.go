package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// selfSign makes a CA and a serving certificate for service ("name.ns")
// valid from now for a year, writes tls.crt/tls.key into dir, and returns
// the CA in PEM. It spares a cluster cert-manager for one webhook; a new
// pair is made at every start, and caInjector publishes it.
func selfSign(dir, service string, now time.Time) ([]byte, error) {
	name, ns, ok := strings.Cut(service, ".")
	if !ok || name == "" || ns == "" {
		return nil, fmt.Errorf("operator: webhook service %q: want name.namespace", service)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capstan-operator-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("operator: CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	host := name + "." + ns + ".svc"
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		DNSNames:  []string{host, host + ".cluster.local", name + "." + ns},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("operator: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// caInjector puts the CA into every webhook of a
// ValidatingWebhookConfiguration once the manager starts (on every
// replica, leader or not: each serves the webhook with its own pair, so
// the last one to start wins and the others' pairs go unused).
type caInjector struct {
	client client.Reader
	writer client.Writer
	name   string
	ca     []byte
	log    *slog.Logger
}

// NeedLeaderElection: every replica serves the webhook.
func (c *caInjector) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (c *caInjector) Start(ctx context.Context) error {
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := c.client.Get(ctx, types.NamespacedName{Name: c.name}, &cfg); err != nil {
		return fmt.Errorf("operator: webhook configuration %s: %w", c.name, err)
	}
	patch := client.MergeFrom(cfg.DeepCopy())
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = c.ca
	}
	if err := c.writer.Patch(ctx, &cfg, patch); err != nil {
		return fmt.Errorf("operator: inject CA into %s: %w", c.name, err)
	}
	c.log.InfoContext(ctx, "webhook CA injected", "configuration", c.name)
	return nil
}
