package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// The endpoint config tag capstan:routing-strategy picks any registered
// routing strategy for every variant (SageMaker's RoutingConfig enumerates
// only two), wins over RoutingConfig, and is checked when the config is
// created: what reaches the gateway is the route's strategy.
func TestRoutingStrategyTag(t *testing.T) {
	h := startHarness(t, config.Config{})
	h.setup(t, "m1", "unused", 1)
	ctx := context.Background()
	tag := func(v string) []smtypes.Tag {
		return []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("x")}, {Key: aws.String("capstan:routing-strategy"), Value: aws.String(v)}}
	}
	variant := func(name string, rc smtypes.RoutingStrategy) smtypes.ProductionVariant {
		v := smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String("m1"),
			InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1), InitialVariantWeight: aws.Float32(1)}
		if rc != "" {
			v.RoutingConfig = &smtypes.ProductionVariantRoutingConfig{RoutingStrategy: rc}
		}
		return v
	}
	tests := []struct {
		name     string
		tags     []smtypes.Tag
		variants []smtypes.ProductionVariant
		want     map[string]string // variant → the route's strategy; nil: rejected
	}{
		{"tag alone", tag("kvaware"), []smtypes.ProductionVariant{variant("A", "")}, map[string]string{"A": "kvaware"}},
		{"tag applies to every variant", tag("prefixaware"),
			[]smtypes.ProductionVariant{variant("A", ""), variant("B", smtypes.RoutingStrategyRandom)},
			map[string]string{"A": "prefixaware", "B": "prefixaware"}},
		{"tag wins over RoutingConfig", tag("session"), []smtypes.ProductionVariant{variant("A", smtypes.RoutingStrategyLeastOutstandingRequests)},
			map[string]string{"A": "session"}},
		{"tag spelled as the gateway matches it", tag("Round-Robin"), []smtypes.ProductionVariant{variant("A", "")}, map[string]string{"A": "Round-Robin"}},
		{"no tag: RoutingConfig as before", nil, []smtypes.ProductionVariant{variant("A", smtypes.RoutingStrategyRandom)}, map[string]string{"A": "RANDOM"}},
		{"unknown value", tag("cache-please"), []smtypes.ProductionVariant{variant("A", "")}, nil},
		{"empty value", tag(""), []smtypes.ProductionVariant{variant("A", "")}, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := "tagged-" + string(rune('a'+i))
			_, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(cfg),
				ProductionVariants: tt.variants, Tags: tt.tags})
			if tt.want == nil {
				code, msg := apiCode(err)
				if code != "ValidationException" || !strings.Contains(msg, "capstan:routing-strategy") ||
					!strings.Contains(msg, strings.Join(gateway.Strategies(), ", ")) {
					t.Fatalf("got %s %q, want a ValidationException naming the tag and listing %v", code, msg, gateway.Strategies())
				}
				if _, err := h.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String(cfg)}); err == nil {
					t.Fatal("the rejected config was stored")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ep := "ep-" + cfg
			if _, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(cfg)}); err != nil {
				t.Fatal(err)
			}
			// DescribeEndpoint says which strategy each variant runs, in
			// SageMaker's field even when the value is outside its enum.
			for _, v := range h.waitStatus(t, ep, smtypes.EndpointStatusInService).ProductionVariants {
				if rc := v.RoutingConfig; rc == nil || string(rc.RoutingStrategy) != tt.want[aws.ToString(v.VariantName)] {
					t.Errorf("DescribeEndpoint variant %s RoutingConfig %+v, want %s", aws.ToString(v.VariantName), rc, tt.want[aws.ToString(v.VariantName)])
				}
			}
			got := map[string]string{}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if r, ok := h.srv.Gateway.Route(ep); ok {
					for _, v := range r.Variants {
						got[v.Name] = v.RoutingStrategy
					}
				}
				if len(got) == len(tt.want) || time.Now().After(deadline) {
					break
				}
			}
			for v, s := range tt.want {
				if got[v] != s {
					t.Fatalf("route strategies %v, want %v", got, tt.want)
				}
			}
		})
	}
}
