package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

// TestIgnoredFieldsWarnEverywhere: a manifest with fields capstan accepts
// but cannot honour (tlsConfig, dnsConfig, a custom health-check path) gets,
// through the real HTTP API, a warning per field from apply, a Warning
// event per field on the deployment and an "Ignored fields" section in
// describe; the same manifest without them gets none of the three.
func TestIgnoredFieldsWarnEverywhere(t *testing.T) {
	e := newCLIEnv(t)
	const extra = `  tlsConfig:
    tlsCertificateOutputS3Uri: "s3://certs/out"
    customCertificateConfig: {acmArn: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0000-1111-2222-333344445555", domainName: models.example.com}
  dnsConfig: {hostedZoneId: Z0123456789ABC}
  loadBalancer: {healthCheckPath: /healthz}
`
	withFields := func(name string) string {
		return strings.Replace(strings.Replace(smallIEC, "name: small", "name: "+name, 1), "spec:\n", "spec:\n"+extra, 1)
	}
	for _, tc := range []struct {
		name     string
		manifest string
		want     []string // ignored paths, in table order
	}{
		{"with", withFields("with"), []string{"spec.tlsConfig", "spec.dnsConfig", "spec.loadBalancer.healthCheckPath"}},
		{"without", strings.Replace(smallIEC, "name: small", "name: without", 1), nil},
		// The default health-check path is what the defaulted object holds
		// anyway: not a warning.
		{"default-path", strings.Replace(strings.Replace(smallIEC, "name: small", "name: default-path", 1), "spec:\n", "spec:\n  loadBalancer: {healthCheckPath: /ping}\n", 1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 1. apply prints a warning per field (stderr), the result line as before.
			out, errOut, err := e.run(t, tc.manifest, "apply", "-f", "-")
			if err != nil {
				t.Fatalf("apply: %v %s", err, errOut)
			}
			if !strings.Contains(out, "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/"+tc.name+" created") {
				t.Fatalf("apply stdout %q", out)
			}
			warns := 0
			for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if strings.HasPrefix(l, "Warning: ") {
					warns++
				}
			}
			if warns != len(tc.want) {
				t.Errorf("apply printed %d warnings, want %d:\n%s", warns, len(tc.want), errOut)
			}
			for _, p := range tc.want {
				if !strings.Contains(errOut, "Warning: inferenceendpointconfig.inference.sagemaker.aws.amazon.com/"+tc.name+": "+p+" has no effect here: ") {
					t.Errorf("apply stderr lacks the warning for %s:\n%s", p, errOut)
				}
			}

			// 2. the controller records a Warning event per field (HTTP events API).
			e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", tc.name)
			resp, err := http.Get(e.srv.URL + manifestapi.ObjectPath(manifestapi.Resources[0], "default", tc.name) + "/events")
			if err != nil {
				t.Fatal(err)
			}
			var evs manifestapi.EventList
			err = json.NewDecoder(resp.Body).Decode(&evs)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs.Items {
				if ev.Reason == manifest.ReasonIgnoredField {
					if ev.Type != manifest.EventWarning {
						t.Errorf("event %+v is not a Warning", ev)
					}
					got = append(got, strings.SplitN(ev.Message, " has no effect here: ", 2)[0])
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("IgnoredField events name %v, want %v (events %+v)", got, tc.want, evs.Items)
			}
			// Reconciling again does not repeat them.
			e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", tc.name)

			// 3. describe lists them under their own heading.
			desc := e.mustRun(t, "", "describe", "iec", tc.name)
			hasHeading := strings.Contains(desc, "Ignored fields (accepted, no effect here):\n")
			if hasHeading != (len(tc.want) > 0) {
				t.Errorf("describe heading present = %v, want %v:\n%s", hasHeading, len(tc.want) > 0, desc)
			}
			for _, p := range tc.want {
				if !strings.Contains(desc, "\n  "+p+": ") {
					t.Errorf("describe lacks the line for %s:\n%s", p, desc)
				}
				if strings.Count(desc, "Warning   IgnoredField") != len(tc.want) {
					t.Errorf("describe events show %d IgnoredField warnings, want %d:\n%s", strings.Count(desc, "Warning   IgnoredField"), len(tc.want), desc)
				}
			}
		})
	}
}
