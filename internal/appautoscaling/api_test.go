package appautoscaling

import (
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/aws/aws-sdk-go-v2/service/applicationautoscaling/types"

	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	resMyEP = "endpoint/my-ep/variant/AllTraffic"
)

func sdkRegister(resource string, lo, hi int32) *aas.RegisterScalableTargetInput {
	return &aas.RegisterScalableTargetInput{
		ServiceNamespace:  types.ServiceNamespaceSagemaker,
		ResourceId:        aws.String(resource),
		ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		MinCapacity:       aws.Int32(lo),
		MaxCapacity:       aws.Int32(hi),
	}
}

func ttPolicy(resource, name string, target float64, mutate ...func(*types.TargetTrackingScalingPolicyConfiguration)) *aas.PutScalingPolicyInput {
	cfg := &types.TargetTrackingScalingPolicyConfiguration{
		TargetValue: aws.Float64(target),
		PredefinedMetricSpecification: &types.PredefinedMetricSpecification{
			PredefinedMetricType: types.MetricTypeSageMakerVariantInvocationsPerInstance,
		},
		ScaleOutCooldown: aws.Int32(60),
		ScaleInCooldown:  aws.Int32(300),
	}
	for _, m := range mutate {
		m(cfg)
	}
	return &aas.PutScalingPolicyInput{
		PolicyName:                               aws.String(name),
		ServiceNamespace:                         types.ServiceNamespaceSagemaker,
		ResourceId:                               aws.String(resource),
		ScalableDimension:                        types.ScalableDimensionSageMakerVariantDesiredInstanceCount,
		PolicyType:                               types.PolicyTypeTargetTrackingScaling,
		TargetTrackingScalingPolicyConfiguration: cfg,
	}
}

// TestSDKLifecycle drives every operation through the AWS Go SDK.
func TestSDKLifecycle(t *testing.T) {
	e := newEnv(t)
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	ctx := e.ctx

	reg, err := e.client.RegisterScalableTarget(ctx, sdkRegister(resMyEP, 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	arnRE := regexp.MustCompile(`^arn:aws:application-autoscaling:eu-west-1:123456789012:scalable-target/[0-9a-f]{36}$`)
	if !arnRE.MatchString(aws.ToString(reg.ScalableTargetARN)) {
		t.Fatalf("target ARN %q", aws.ToString(reg.ScalableTargetARN))
	}

	// Re-registering updates the range in place and keeps the ARN.
	reg2, err := e.client.RegisterScalableTarget(ctx, &aas.RegisterScalableTargetInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, ResourceId: aws.String(resMyEP),
		ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount, MaxCapacity: aws.Int32(6),
	})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(reg2.ScalableTargetARN) != aws.ToString(reg.ScalableTargetARN) {
		t.Fatalf("ARN changed on update: %s → %s", aws.ToString(reg.ScalableTargetARN), aws.ToString(reg2.ScalableTargetARN))
	}
	dt, err := e.client.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: types.ServiceNamespaceSagemaker})
	if err != nil {
		t.Fatal(err)
	}
	if len(dt.ScalableTargets) != 1 {
		t.Fatalf("%d targets", len(dt.ScalableTargets))
	}
	st := dt.ScalableTargets[0]
	if aws.ToInt32(st.MinCapacity) != 1 || aws.ToInt32(st.MaxCapacity) != 6 || aws.ToString(st.ResourceId) != resMyEP ||
		st.ScalableDimension != types.ScalableDimensionSageMakerVariantDesiredInstanceCount || !st.CreationTime.Equal(t0) ||
		st.SuspendedState == nil || aws.ToBool(st.SuspendedState.DynamicScalingInSuspended) {
		t.Fatalf("target %+v", st)
	}
	// Other namespaces have no targets.
	if dt, err := e.client.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: types.ServiceNamespaceEcs}); err != nil || len(dt.ScalableTargets) != 0 {
		t.Fatalf("ecs targets: %v %v", dt, err)
	}

	pp, err := e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "invocations", 50))
	if err != nil {
		t.Fatal(err)
	}
	polRE := regexp.MustCompile(`^arn:aws:autoscaling:eu-west-1:123456789012:scalingPolicy:[0-9a-f-]{36}:resource/sagemaker/endpoint/my-ep/variant/AllTraffic:policyName/invocations$`)
	if !polRE.MatchString(aws.ToString(pp.PolicyARN)) {
		t.Fatalf("policy ARN %q", aws.ToString(pp.PolicyARN))
	}
	if len(pp.Alarms) != 2 || !strings.Contains(aws.ToString(pp.Alarms[0].AlarmName), "TargetTracking-"+resMyEP+"-AlarmHigh-") {
		t.Fatalf("alarms %+v", pp.Alarms)
	}
	// Putting it again updates it and keeps its ARN.
	pp2, err := e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "invocations", 70, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.DisableScaleIn = aws.Bool(true)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(pp2.PolicyARN) != aws.ToString(pp.PolicyARN) {
		t.Fatalf("policy ARN changed")
	}
	dp, err := e.client.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, ResourceId: aws.String(resMyEP),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dp.ScalingPolicies) != 1 {
		t.Fatalf("%d policies", len(dp.ScalingPolicies))
	}
	p := dp.ScalingPolicies[0]
	c := p.TargetTrackingScalingPolicyConfiguration
	if p.PolicyType != types.PolicyTypeTargetTrackingScaling || c == nil || aws.ToFloat64(c.TargetValue) != 70 ||
		!aws.ToBool(c.DisableScaleIn) || aws.ToInt32(c.ScaleOutCooldown) != 60 ||
		c.PredefinedMetricSpecification.PredefinedMetricType != types.MetricTypeSageMakerVariantInvocationsPerInstance {
		t.Fatalf("policy %+v / %+v", p, c)
	}
	if dp, err := e.client.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, PolicyNames: []string{"other"},
	}); err != nil || len(dp.ScalingPolicies) != 0 {
		t.Fatalf("filter by name: %v %v", dp, err)
	}

	// A custom metric policy.
	if _, err := e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "latency", 200000, func(c *types.TargetTrackingScalingPolicyConfiguration) {
		c.PredefinedMetricSpecification = nil
		c.CustomizedMetricSpecification = &types.CustomizedMetricSpecification{
			MetricName: aws.String("ModelLatency"), Namespace: aws.String("AWS/SageMaker"), Statistic: types.MetricStatisticAverage,
			Dimensions: []types.MetricDimension{{Name: aws.String("EndpointName"), Value: aws.String("my-ep")}, {Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}},
		}
	})); err != nil {
		t.Fatal(err)
	}

	if _, err := e.client.DeleteScalingPolicy(ctx, &aas.DeleteScalingPolicyInput{
		PolicyName: aws.String("invocations"), ServiceNamespace: types.ServiceNamespaceSagemaker,
		ResourceId: aws.String(resMyEP), ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount,
	}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.DeleteScalingPolicy(ctx, &aas.DeleteScalingPolicyInput{
		PolicyName: aws.String("invocations"), ServiceNamespace: types.ServiceNamespaceSagemaker,
		ResourceId: aws.String(resMyEP), ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount,
	})
	var onf *types.ObjectNotFoundException
	if !errors.As(err, &onf) || !strings.Contains(onf.ErrorMessage(), "policy name: invocations") {
		t.Fatalf("second delete: %v", err)
	}

	// Deregistering removes the remaining policy too.
	dereg := &aas.DeregisterScalableTargetInput{ServiceNamespace: types.ServiceNamespaceSagemaker, ResourceId: aws.String(resMyEP),
		ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount}
	if _, err := e.client.DeregisterScalableTarget(ctx, dereg); err != nil {
		t.Fatal(err)
	}
	if dp, err := e.client.DescribeScalingPolicies(ctx, &aas.DescribeScalingPoliciesInput{ServiceNamespace: types.ServiceNamespaceSagemaker}); err != nil || len(dp.ScalingPolicies) != 0 {
		t.Fatalf("policies after deregister: %+v %v", dp, err)
	}
	_, err = e.client.DeregisterScalableTarget(ctx, dereg)
	if !errors.As(err, &onf) || onf.ErrorMessage() != "No scalable target registered for service namespace: sagemaker, resource ID: endpoint/my-ep/variant/AllTraffic, scalable dimension: sagemaker:variant:DesiredInstanceCount" {
		t.Fatalf("second deregister: %v", err)
	}
	_, err = e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "p", 10))
	if !errors.As(err, &onf) {
		t.Fatalf("policy on unregistered target: %v", err)
	}
}

// TestSDKErrorTypes checks that the SDK decodes each modelled exception.
func TestSDKErrorTypes(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxTargets = 1; o.MaxPoliciesPerTarget = 1 })
	e.vars.add("my-ep", "AllTraffic", 1, 3)
	e.vars.add("ep2", "AllTraffic", 1, 0)
	ctx := e.ctx

	_, err := e.client.RegisterScalableTarget(ctx, sdkRegister(resMyEP, 1, 5))
	var ve *types.ValidationException
	if !errors.As(err, &ve) || !strings.Contains(ve.ErrorMessage(), "MaxCapacity 5 exceeds the reservation of variant AllTraffic of endpoint my-ep") {
		t.Fatalf("reservation: %v", err)
	}
	if _, err := e.client.RegisterScalableTarget(ctx, sdkRegister(resMyEP, 1, 3)); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.RegisterScalableTarget(ctx, sdkRegister("endpoint/ep2/variant/AllTraffic", 1, 3))
	var le *types.LimitExceededException
	if !errors.As(err, &le) {
		t.Fatalf("target limit: %v", err)
	}
	if _, err := e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "a", 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.PutScalingPolicy(ctx, ttPolicy(resMyEP, "b", 10)); !errors.As(err, &le) {
		t.Fatalf("policy limit: %v", err)
	}
	_, err = e.client.DescribeScalableTargets(ctx, &aas.DescribeScalableTargetsInput{ServiceNamespace: types.ServiceNamespaceSagemaker, NextToken: aws.String("bogus")})
	var nt *types.InvalidNextTokenException
	if !errors.As(err, &nt) {
		t.Fatalf("bad token: %v", err)
	}
	_, err = e.client.PutScalingPolicy(ctx, &aas.PutScalingPolicyInput{
		PolicyName: aws.String("step"), ServiceNamespace: types.ServiceNamespaceSagemaker, ResourceId: aws.String(resMyEP),
		ScalableDimension: types.ScalableDimensionSageMakerVariantDesiredInstanceCount, PolicyType: types.PolicyTypeStepScaling,
	})
	if !errors.As(err, &ve) || !strings.Contains(ve.ErrorMessage(), "StepScaling policies are not supported") {
		t.Fatalf("step scaling: %v", err)
	}
}

func TestPagination(t *testing.T) {
	e := newEnv(t)
	for _, ep := range []string{"a", "b", "c", "d", "e"} {
		e.vars.add(ep, "v", 1, 0)
		e.clk.Step(time.Second)
		if _, err := e.client.RegisterScalableTarget(e.ctx, sdkRegister("endpoint/"+ep+"/variant/v", 1, 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.PutScalingPolicy(e.ctx, ttPolicy("endpoint/"+ep+"/variant/v", "p", 10)); err != nil {
			t.Fatal(err)
		}
	}
	pg := aas.NewDescribeScalableTargetsPaginator(e.client, &aas.DescribeScalableTargetsInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, MaxResults: aws.Int32(2)})
	var got []string
	pages := 0
	for pg.HasMorePages() {
		out, err := pg.NextPage(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tg := range out.ScalableTargets {
			got = append(got, aws.ToString(tg.ResourceId))
		}
	}
	want := "endpoint/a/variant/v endpoint/b/variant/v endpoint/c/variant/v endpoint/d/variant/v endpoint/e/variant/v"
	if pages != 3 || strings.Join(got, " ") != want {
		t.Fatalf("%d pages: %v", pages, got)
	}
	pp := aas.NewDescribeScalingPoliciesPaginator(e.client, &aas.DescribeScalingPoliciesInput{
		ServiceNamespace: types.ServiceNamespaceSagemaker, MaxResults: aws.Int32(3)})
	n, pages := 0, 0
	for pp.HasMorePages() {
		out, err := pp.NextPage(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(out.ScalingPolicies)
	}
	if n != 5 || pages != 2 {
		t.Fatalf("policies: %d in %d pages", n, pages)
	}
}

// call posts a raw request.
func call(t *testing.T, url, op, body string) (int, http.Header, []byte) {
	t.Helper()
	return awsjsontest.Call(t, url, TargetPrefix+op, body)
}

const (
	ref      = `"ServiceNamespace":"sagemaker","ResourceId":"endpoint/my-ep/variant/AllTraffic","ScalableDimension":"sagemaker:variant:DesiredInstanceCount"`
	predef   = `"PredefinedMetricSpecification":{"PredefinedMetricType":"SageMakerVariantInvocationsPerInstance"}`
	ttPrefix = `{"PolicyName":"p",` + ref + `,"PolicyType":"TargetTrackingScaling","TargetTrackingScalingPolicyConfiguration":`
)

// TestValidationGolden pins the wire body of each rejected request (and of
// the successful responses) to testdata/; -update rewrites them.
func TestValidationGolden(t *testing.T) {
	e := newEnv(t)
	e.vars.add("my-ep", "AllTraffic", 1, 0)
	e.vars.add("reserved", "AllTraffic", 1, 4)
	steps := []struct {
		name, op, body string
		status         int
		code           string
	}{
		{"register_missing_members", "RegisterScalableTarget", `{}`, 400, CodeValidation},
		{"register_bad_enums", "RegisterScalableTarget", `{"ServiceNamespace":"sagemakr","ResourceId":"endpoint/my-ep/variant/AllTraffic","ScalableDimension":"sagemaker:variant:Count","MinCapacity":-1}`, 400, CodeValidation},
		{"register_other_namespace", "RegisterScalableTarget", `{"ServiceNamespace":"ecs","ResourceId":"service/c/s","ScalableDimension":"ecs:service:DesiredCount","MinCapacity":1,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_other_dimension", "RegisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"inference-component/x","ScalableDimension":"sagemaker:inference-component:DesiredCopyCount","MinCapacity":1,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_bad_resource_id", "RegisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"endpoint/my_ep","ScalableDimension":"sagemaker:variant:DesiredInstanceCount","MinCapacity":1,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_new_without_range", "RegisterScalableTarget", `{` + ref + `}`, 400, CodeValidation},
		{"register_min_above_max", "RegisterScalableTarget", `{` + ref + `,"MinCapacity":3,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_min_zero", "RegisterScalableTarget", `{` + ref + `,"MinCapacity":0,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_unknown_endpoint", "RegisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"endpoint/nope/variant/AllTraffic","ScalableDimension":"sagemaker:variant:DesiredInstanceCount","MinCapacity":1,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_unknown_variant", "RegisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"endpoint/my-ep/variant/Other","ScalableDimension":"sagemaker:variant:DesiredInstanceCount","MinCapacity":1,"MaxCapacity":2}`, 400, CodeValidation},
		{"register_beyond_reservation", "RegisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"endpoint/reserved/variant/AllTraffic","ScalableDimension":"sagemaker:variant:DesiredInstanceCount","MinCapacity":1,"MaxCapacity":5}`, 400, CodeValidation},
		{"register_malformed", "RegisterScalableTarget", `{"MinCapacity":"one"`, 400, CodeSerialization},
		{"policy_unregistered_target", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,` + predef + `}}`, 400, CodeObjectNotFound},
		{"register_above_variant_cap", "RegisterScalableTarget", `{` + ref + `,"MinCapacity":1,"MaxCapacity":1001}`, 400, CodeValidation},
		{"register", "RegisterScalableTarget", `{` + ref + `,"MinCapacity":1,"MaxCapacity":4}`, 200, ""},
		{"describe_targets", "DescribeScalableTargets", `{"ServiceNamespace":"sagemaker","ResourceIds":["endpoint/my-ep/variant/AllTraffic"]}`, 200, ""},
		{"policy_step_scaling", "PutScalingPolicy", `{"PolicyName":"p",` + ref + `,"PolicyType":"StepScaling","StepScalingPolicyConfiguration":{"AdjustmentType":"ChangeInCapacity"}}`, 400, CodeValidation},
		{"policy_type_omitted", "PutScalingPolicy", `{"PolicyName":"p",` + ref + `}`, 400, CodeValidation},
		{"policy_missing_config", "PutScalingPolicy", `{"PolicyName":"p",` + ref + `,"PolicyType":"TargetTrackingScaling"}`, 400, CodeValidation},
		{"policy_missing_target_value", "PutScalingPolicy", ttPrefix + `{` + predef + `}}`, 400, CodeValidation},
		{"policy_zero_target_value", "PutScalingPolicy", ttPrefix + `{"TargetValue":0,` + predef + `}}`, 400, CodeValidation},
		{"policy_huge_target_value", "PutScalingPolicy", ttPrefix + `{"TargetValue":1e200,` + predef + `}}`, 400, CodeValidation},
		{"policy_no_metric", "PutScalingPolicy", ttPrefix + `{"TargetValue":10}}`, 400, CodeValidation},
		{"policy_both_metrics", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,` + predef + `,"CustomizedMetricSpecification":{"MetricName":"Invocations","Namespace":"AWS/SageMaker","Statistic":"Sum"}}}`, 400, CodeValidation},
		{"policy_unsupported_predefined", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,"PredefinedMetricSpecification":{"PredefinedMetricType":"ECSServiceAverageCPUUtilization"}}}`, 400, CodeValidation},
		{"policy_custom_namespace", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,"CustomizedMetricSpecification":{"MetricName":"CPU","Namespace":"AWS/EC2","Statistic":"Average"}}}`, 400, CodeValidation},
		{"policy_custom_bad_statistic", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,"CustomizedMetricSpecification":{"MetricName":"Invocations","Namespace":"AWS/SageMaker","Statistic":"p99"}}}`, 400, CodeValidation},
		{"policy_custom_metric_math", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,"CustomizedMetricSpecification":{"Metrics":[{"Id":"m1","Expression":"a+b"}]}}}`, 400, CodeValidation},
		{"policy_negative_cooldown", "PutScalingPolicy", ttPrefix + `{"TargetValue":10,` + predef + `,"ScaleOutCooldown":-5}}`, 400, CodeValidation},
		{"put_policy", "PutScalingPolicy", ttPrefix + `{"TargetValue":50,` + predef + `,"ScaleOutCooldown":60,"ScaleInCooldown":600}}`, 200, ""},
		{"describe_policies", "DescribeScalingPolicies", `{"ServiceNamespace":"sagemaker"}`, 200, ""},
		{"describe_policies_max_results", "DescribeScalingPolicies", `{"ServiceNamespace":"sagemaker","MaxResults":11}`, 400, CodeValidation},
		{"describe_targets_bad_token", "DescribeScalableTargets", `{"ServiceNamespace":"sagemaker","NextToken":"zzz"}`, 400, CodeInvalidNextToken},
		{"describe_activities_missing_namespace", "DescribeScalingActivities", `{}`, 400, CodeValidation},
		{"delete_missing_policy", "DeleteScalingPolicy", `{"PolicyName":"nope",` + ref + `}`, 400, CodeObjectNotFound},
		{"deregister_missing", "DeregisterScalableTarget", `{"ServiceNamespace":"sagemaker","ResourceId":"endpoint/other/variant/v","ScalableDimension":"sagemaker:variant:DesiredInstanceCount"}`, 400, CodeObjectNotFound},
		{"unknown_operation", "TagResource", `{}`, 400, CodeUnknownOperation},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			e.clk.Step(time.Second)
			status, hdr, raw := call(t, e.srv.URL, s.op, s.body)
			if status != s.status {
				t.Fatalf("status %d, want %d: %s", status, s.status, raw)
			}
			if s.code != "" {
				var body map[string]string
				_ = json.Unmarshal(raw, &body)
				if body["__type"] != s.code || hdr.Get("X-Amzn-ErrorType") != s.code || body["Message"] == "" {
					t.Fatalf("code %q / header %q, want %s: %s", body["__type"], hdr.Get("X-Amzn-ErrorType"), s.code, raw)
				}
			}
			awsjsontest.Golden(t, s.name, raw, *update)
		})
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 64 })
	status, _, raw := call(t, e.srv.URL, "DescribeScalableTargets", `{"ServiceNamespace":"sagemaker","ResourceIds":["`+strings.Repeat("x", 200)+`"]}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "larger than the limit of 64 bytes") {
		t.Fatalf("%d %s", status, raw)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
	req.Header.Set("X-Amz-Target", TargetPrefix+"DescribeScalableTargets")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}
