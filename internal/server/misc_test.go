package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/config"
)

func TestMetricsAndHealth(t *testing.T) {
	h := startHarness(t, config.Config{})
	h.serving(t, "ep")
	resp, err := http.Get(h.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	fam, ok := families["capstan_endpoints"]
	if !ok {
		t.Fatal("no capstan_endpoints metric")
	}
	got := map[string]float64{}
	for _, m := range fam.GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	if got["InService"] != 1 || got["Creating"] != 0 {
		t.Fatalf("capstan_endpoints = %v", got)
	}
}

// TestConcurrentCreatesAreSerialized: many clients creating the same and
// different names at once; each name is created exactly once.
func TestConcurrentCreatesAreSerialized(t *testing.T) {
	h := startHarness(t, config.Config{})
	const names, tries = 5, 6
	var mu sync.Mutex
	created := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < names*tries; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("m%d", i%names)
			_, err := h.sm.CreateModel(context.Background(), &sm.CreateModelInput{ModelName: aws.String(name)})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				created[name]++
			} else if code, msg := apiCode(err); code != "ValidationException" || !strings.HasPrefix(msg, "Cannot create already existing model") {
				t.Errorf("create %s: %s %s", name, code, msg)
			}
		}(i)
	}
	wg.Wait()
	for i := 0; i < names; i++ {
		if n := created[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("m%d created %d times", i, n)
		}
	}
	out, err := h.sm.ListModels(context.Background(), &sm.ListModelsInput{})
	if err != nil || len(out.Models) != names {
		t.Fatalf("list: %d models, %v", len(out.Models), err)
	}
}
