package console_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// The browser tests drive the real binary (`capstan serve --dev-clock`) in
// Debian's headless Chromium through the DevTools protocol (chromedp), as a
// user would: they click, type and read what the pages show.

var updateDocs = flag.Bool("update-docs", false, "copy the screenshots docs/console.md shows into docs/images/console")

// server is a running `capstan serve` and clients for its APIs.
type server struct {
	URL    string
	SM     *sm.Client
	SMR    *smr.Client
	Dir    string
	bin    string
	shared bool // sharedServer: other tests use it too
}

// startServer runs capstan serve for t alone, on a free port with a dev
// clock and the given capstan.yaml (empty: none) and extra flags. Tests that
// need no such server of their own use sharedServer.
func startServer(t testing.TB, yaml string, args ...string) *server {
	t.Helper()
	bin := testutil.CapstanBinary(t)
	dir := t.TempDir()
	all, err := serveArgs(dir, yaml, args...)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.Start(t, context.Background(), bin, all...)
	line := p.WaitLine(t, "capstan serving on ", 60*time.Second)
	return newServer(strings.TrimSpace(line[strings.Index(line, "http://"):]), dir, bin, yaml)
}

// serveArgs are capstan serve's arguments for a server with its data in dir,
// a dev clock, the given capstan.yaml (written into dir; empty: none) and
// extra flags.
func serveArgs(dir, yaml string, args ...string) ([]string, error) {
	all := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--dev-clock",
		"--engine-time-scale", "0.01"}
	if yaml != "" {
		cfg := filepath.Join(dir, "capstan.yaml")
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return nil, err
		}
		all = append(all, "--config", cfg)
	}
	return append(all, args...), nil
}

// newServer is the server at url, with API clients that sign with yaml's
// credentials.
func newServer(url, dir, bin, yaml string) *server {
	key, secret := "AKIDTEST", "secret"
	if k, s, ok := credentialsIn(yaml); ok {
		key, secret = k, s
	}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""), Retryer: testutil.AWSRetryer}
	return &server{URL: url, Dir: dir, bin: bin,
		SM:  sm.NewFromConfig(awsCfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(url) }),
		SMR: smr.NewFromConfig(awsCfg, func(o *smr.Options) { o.BaseEndpoint = aws.String(url) })}
}

// credentialsIn finds the access key pair in a test's capstan.yaml written
// as `credentials: [{accessKeyId: K, secretAccessKey: S}]`.
func credentialsIn(yaml string) (key, secret string, ok bool) {
	var k, s string
	for _, f := range strings.FieldsFunc(yaml, func(r rune) bool { return strings.ContainsRune("{}[],\n", r) }) {
		name, val, found := strings.Cut(strings.TrimSpace(f), ":")
		if !found {
			continue
		}
		switch strings.TrimSpace(name) {
		case "accessKeyId":
			k = strings.TrimSpace(val)
		case "secretAccessKey":
			s = strings.TrimSpace(val)
		}
	}
	return k, s, k != "" && s != ""
}

// advanceClock moves the server's dev clock, as `capstan clock advance` does.
func (s *server) advanceClock(t testing.TB, d time.Duration, token string) {
	t.Helper()
	args := []string{"clock", "advance", d.String(), "--server", s.URL}
	if token != "" {
		args = append(args, "--token", token)
	}
	p := testutil.Start(t, context.Background(), s.bin, args...)
	if err := p.Cmd.Wait(); err != nil {
		t.Fatalf("capstan %v: %v\n%s", args, err, p.Output())
	}
}

// run runs browser actions with a timeout, failing the test with the page's
// text when one fails.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	get(t, ctx, what, chromedp.Steps(actions...))
}

// get runs one browser action that returns a value, failing the test as run
// does.
func get[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, a)
	if err != nil {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		body, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		dcancel()
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
	return v
}

// artifactsDir is where screenshots go: $CAPSTAN_ARTIFACTS/console, else
// test/artifacts/console in the repository (ignored by git).
func artifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CAPSTAN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(testutil.RepoRoot(t), "test", "artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the viewport as name.png among the artefacts, and with
// -update-docs into docs/images/console when docs is true.
func screenshot(t testing.TB, ctx context.Context, name string, docs bool) {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	path := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if docs && *updateDocs {
		dir := filepath.Join(testutil.RepoRoot(t), "docs", "images", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s", path)
}

// waitText waits until the element sel (CSS) contains want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			got, err := chromedp.Evaluate[string](fmt.Sprintf(
				`(() => { const e = document.querySelector(%q); return e ? e.innerText : ""; })()`, sel))(ctx, tg)
			if err != nil {
				return err
			}
			if strings.Contains(got, want) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%q never contained %q (last: %q)", sel, want, got)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// waitRow waits until, in the row of the table sel (CSS) with a cell that
// reads exactly name, the element inner (CSS; empty: the row) contains want:
// a list on the shared server shows other tests' objects too.
func waitRow(sel, name, inner, want string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r => {
		if (![...r.cells].some(c => c.innerText.trim() === %q)) return false;
		const e = %q ? r.querySelector(%q) : r;
		return !!e && e.innerText.includes(%q);
	})`, sel+" tbody tr", name, inner, inner, want))
}

// rowHas is whether the row of the table sel with a cell that reads exactly
// name has an element matching inner (CSS).
func rowHas(t testing.TB, ctx context.Context, sel, name, inner string) bool {
	t.Helper()
	return get(t, ctx, "the row of "+name, chromedp.Evaluate[bool](fmt.Sprintf(`[...document.querySelectorAll(%q)].some(r =>
		[...r.cells].some(c => c.innerText.trim() === %q) && !!r.querySelector(%q))`, sel+" tbody tr", name, inner)))
}

// createEndpoint makes, through the SageMaker API as a user's script next to
// the console would, model NAME-model (Llama 3.1 8B on the simulated engine),
// config NAME-cfg of the one variant v (its ModelName filled in) and endpoint
// NAME; it does not wait. On the shared server they are deleted when t ends.
func (s *server) createEndpoint(t testing.TB, name string, v smtypes.ProductionVariant) {
	t.Helper()
	s.deleteEndpointWhenDone(t, name)
	ctx := context.Background()
	if _, err := s.SM.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name + "-model"),
		ExecutionRoleArn: aws.String("arn:aws:iam::000000000000:role/capstan"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"),
			Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}}); err != nil {
		t.Fatal(err)
	}
	v.ModelName = aws.String(name + "-model")
	if _, err := s.SM.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-cfg"),
		ProductionVariants: []smtypes.ProductionVariant{v}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SM.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-cfg")}); err != nil {
		t.Fatal(err)
	}
}

// onPlan is a variant "AllTraffic" of one ml.p5.48xlarge on training plan
// planArn.
func onPlan(planArn *string) smtypes.ProductionVariant {
	return smtypes.ProductionVariant{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
		InstanceType: smtypes.ProductionVariantInstanceTypeMlP548xlarge,
		CapacityReservationConfig: &smtypes.ProductionVariantCapacityReservationConfig{
			CapacityReservationPreference: smtypes.CapacityReservationPreferenceCapacityReservationsOnly,
			MlReservationArn:              planArn}}
}

// getJSON GETs path (the manifests or node API, config.json; no token) into
// v and returns the HTTP status.
func (s *server) getJSON(t testing.TB, path string, v any) int {
	t.Helper()
	res, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if v != nil && res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return res.StatusCode
}

// apply applies manifests as `capstan apply -f` does, with the admin token
// when one is given.
func (s *server) apply(t testing.TB, yaml, token string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+manifestsBase+"/apply", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var st map[string]any
		_ = json.NewDecoder(res.Body).Decode(&st)
		t.Fatalf("apply: %d %v", res.StatusCode, st)
	}
}

// serverNow is the server's (dev) clock, from the console's config.json.
func serverNow(t testing.TB, s *server) time.Time {
	t.Helper()
	var cfg struct {
		Now time.Time `json:"now"`
	}
	if code := s.getJSON(t, "/console/config.json", &cfg); code != http.StatusOK {
		t.Fatalf("GET /console/config.json: %d", code)
	}
	return cfg.Now
}

// count is how many elements match sel on the page shown.
func count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	return get(t, ctx, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
}
