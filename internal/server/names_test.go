package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/config"
)

// TestNamesDifferingOnlyInCase: SageMaker names are unique
// case-insensitively (their ARNs lower-case them), so a create whose name
// differs from an existing one only in case is refused as a duplicate, and
// the first resource, its tags and (for an endpoint) its engines are left as
// they were.
func TestNamesDifferingOnlyInCase(t *testing.T) {
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.setup(t, "m1", "c1", 1)
	arn := func(kind, name string) string { return "arn:aws:sagemaker:us-east-1:000000000000:" + kind + "/" + name }
	tags := func(v string) []smtypes.Tag { return []smtypes.Tag{{Key: aws.String("owner"), Value: aws.String(v)}} }
	var offering *string
	tests := []struct {
		kind  string
		first string // the second create's name is this, lower-cased
		// create creates name with tags owner=owner and returns its ARN.
		create func(name, owner string) (string, error)
		// names lists the names of this kind, ascending.
		names      func() ([]string, error)
		code, msg  string
		afterFirst func(t *testing.T, name string)
	}{
		{kind: "model", first: "Case-Model",
			create: func(name, owner string) (string, error) {
				out, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name), Tags: tags(owner),
					PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}})
				if err != nil {
					return "", err
				}
				return aws.ToString(out.ModelArn), nil
			},
			names: func() ([]string, error) {
				out, err := h.sm.ListModels(ctx, &sm.ListModelsInput{})
				if err != nil {
					return nil, err
				}
				var n []string
				for _, m := range out.Models {
					n = append(n, aws.ToString(m.ModelName))
				}
				return n, nil
			},
			code: "ValidationException", msg: `Cannot create already existing model "` + arn("model", "case-model") + `".`},
		{kind: "endpoint configuration", first: "Case-Config",
			create: func(name, owner string) (string, error) {
				out, err := h.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name), Tags: tags(owner),
					ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m1"),
						InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1)}}})
				if err != nil {
					return "", err
				}
				return aws.ToString(out.EndpointConfigArn), nil
			},
			names: func() ([]string, error) {
				out, err := h.sm.ListEndpointConfigs(ctx, &sm.ListEndpointConfigsInput{})
				if err != nil {
					return nil, err
				}
				var n []string
				for _, c := range out.EndpointConfigs {
					n = append(n, aws.ToString(c.EndpointConfigName))
				}
				return n, nil
			},
			code: "ValidationException", msg: `Cannot create already existing endpoint configuration "` + arn("endpoint-config", "case-config") + `".`},
		{kind: "endpoint", first: "Case-Endpoint",
			create: func(name, owner string) (string, error) {
				out, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("c1"), Tags: tags(owner)})
				if err != nil {
					return "", err
				}
				return aws.ToString(out.EndpointArn), nil
			},
			names: func() ([]string, error) {
				out, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{})
				if err != nil {
					return nil, err
				}
				var n []string
				for _, e := range out.Endpoints {
					n = append(n, aws.ToString(e.EndpointName))
				}
				return n, nil
			},
			afterFirst: func(t *testing.T, name string) { h.waitStatus(t, name, smtypes.EndpointStatusInService) },
			code:       "ValidationException", msg: `Cannot create already existing endpoint "` + arn("endpoint", "case-endpoint") + `".`},
		// Training plans are stored under their lower-cased name, so they
		// were refused already; the row keeps them so.
		{kind: "training plan", first: "Case-Plan",
			create: func(name, owner string) (string, error) {
				if offering == nil {
					s, err := h.sm.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
						TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge",
						InstanceCount: aws.Int32(1), DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(time.Now()),
						EndTimeBefore: aws.Time(time.Now().Add(60 * 24 * time.Hour))})
					if err != nil {
						return "", err
					}
					if len(s.TrainingPlanOfferings) == 0 {
						t.Fatal("no training plan offerings")
					}
					offering = s.TrainingPlanOfferings[0].TrainingPlanOfferingId
				}
				out, err := h.sm.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name),
					TrainingPlanOfferingId: offering, Tags: tags(owner)})
				if err != nil {
					return "", err
				}
				return aws.ToString(out.TrainingPlanArn), nil
			},
			names: func() ([]string, error) {
				out, err := h.sm.ListTrainingPlans(ctx, &sm.ListTrainingPlansInput{})
				if err != nil {
					return nil, err
				}
				var n []string
				for _, p := range out.TrainingPlanSummaries {
					n = append(n, aws.ToString(p.TrainingPlanName))
				}
				return n, nil
			},
			code: "ResourceInUse", msg: "Training plan case-plan already exists. Choose a different name."},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			first, second := tc.first, strings.ToLower(tc.first)
			firstARN, err := tc.create(first, "first")
			if err != nil {
				t.Fatalf("create %s: %v", first, err)
			}
			if tc.afterFirst != nil {
				tc.afterFirst(t, first)
			}
			secondARN, err := tc.create(second, "second")
			code, msg := apiCode(err)
			if code != tc.code || msg != tc.msg {
				t.Errorf("create %s after %s: got %s %q (ARN %q)\nwant %s %q", second, first, code, msg, secondARN, tc.code, tc.msg)
			}
			names, err := tc.names()
			if err != nil {
				t.Fatal(err)
			}
			var folded []string
			for _, n := range names {
				if strings.EqualFold(n, first) {
					folded = append(folded, n)
				}
			}
			if !slices.Equal(folded, []string{first}) {
				t.Errorf("listed %q, want only %q", folded, first)
			}
			out, err := h.sm.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(firstARN)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tg := range out.Tags {
				got = append(got, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
			}
			if !slices.Equal(got, []string{"owner=first"}) {
				t.Fatalf("tags of %s: %q, want [owner=first]", firstARN, got)
			}
		})
	}
	// Only the first endpoint runs: the refused one started no engine.
	deadline := time.Now().Add(5 * time.Second)
	for n := len(h.rt.Running()); n != 1; n = len(h.rt.Running()) {
		if time.Now().After(deadline) {
			t.Fatalf("%d replicas running, want 1 (the first endpoint's)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpdateWeightsVariantNamedTwice: UpdateEndpointWeightsAndCapacities
// naming one variant twice is refused, as CreateEndpointConfig refuses a
// repeated variant name, and the endpoint is left as it was.
func TestUpdateWeightsVariantNamedTwice(t *testing.T) {
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	h.serving(t, "ep")
	_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("ep"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{
			{VariantName: aws.String("AllTraffic"), DesiredWeight: aws.Float32(0.5), DesiredInstanceCount: aws.Int32(2)},
			{VariantName: aws.String("AllTraffic"), DesiredWeight: aws.Float32(2), DesiredInstanceCount: aws.Int32(3)},
		}})
	code, msg := apiCode(err)
	want := `Variant name "AllTraffic" is used more than once. Variant names must be unique within DesiredWeightsAndCapacities.`
	if code != "ValidationException" || msg != want {
		t.Fatalf("got %s %q\nwant ValidationException %q", code, msg, want)
	}
	d, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String("ep")})
	if err != nil {
		t.Fatal(err)
	}
	pv := d.ProductionVariants[0]
	if d.EndpointStatus != smtypes.EndpointStatusInService || aws.ToInt32(pv.DesiredInstanceCount) != 1 || aws.ToFloat32(pv.DesiredWeight) != 1 {
		t.Fatalf("after the refused update: status %s, variant %+v; want InService, 1 instance, weight 1", d.EndpointStatus, pv)
	}
}
