package sagemaker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

type createEndpointConfigInput struct {
	EndpointConfigName     *string            `json:"EndpointConfigName"`
	ProductionVariants     []endpoint.Variant `json:"ProductionVariants"`
	DataCaptureConfig      json.RawMessage    `json:"DataCaptureConfig"`
	AsyncInferenceConfig   json.RawMessage    `json:"AsyncInferenceConfig"`
	KmsKeyId               string             `json:"KmsKeyId"`
	ExecutionRoleArn       string             `json:"ExecutionRoleArn"`
	EnableNetworkIsolation bool               `json:"EnableNetworkIsolation"`
	Tags                   []endpoint.Tag     `json:"Tags"`
}

// serverlessInput is ProductionVariantServerlessConfig as sent, telling an
// absent member from 0.
type serverlessInput struct {
	MemorySizeInMB         *int `json:"MemorySizeInMB"`
	MaxConcurrency         *int `json:"MaxConcurrency"`
	ProvisionedConcurrency *int `json:"ProvisionedConcurrency"`
}

// validateServerless checks a ServerlessConfig against SageMaker's model.
func validateServerless(ve *validationError, sc *serverlessInput, p string) {
	p += ".serverlessConfig"
	if ve.Required(sc.MemorySizeInMB != nil, p+".memorySizeInMB") {
		m := *sc.MemorySizeInMB
		ve.IntRange(&m, 1024, 6144, p+".memorySizeInMB")
		if m >= 1024 && m <= 6144 && !slices.Contains(catalog.ServerlessMemorySizes, m) {
			ve.Add(m, p+".memorySizeInMB", "Member must satisfy enum value set: [1024, 2048, 3072, 4096, 5120, 6144]")
		}
	}
	if ve.Required(sc.MaxConcurrency != nil, p+".maxConcurrency") {
		ve.IntRange(sc.MaxConcurrency, 1, endpoint.MaxServerlessConcurrency, p+".maxConcurrency")
	}
	ve.IntRange(sc.ProvisionedConcurrency, 1, endpoint.MaxServerlessConcurrency, p+".provisionedConcurrency")
}

func (a *API) validateVariant(ve *validationError, v *endpoint.Variant, count *int, sc *serverlessInput, i int) {
	p := fmt.Sprintf("productionVariants.%d.member", i+1)
	vn := &v.VariantName
	if v.VariantName == "" {
		vn = nil
	}
	ve.name(vn, p+".variantName", patResourceName, patResourceNameText)
	mn := &v.ModelName
	if v.ModelName == "" {
		mn = nil
	}
	ve.name(mn, p+".modelName", patModelName, patModelNameText)
	if sc != nil {
		// Serverless: instance members are optional; giving them too is
		// refused by the service (a variant is one kind or the other).
		validateServerless(ve, sc, p)
	}
	if ve.Required(v.InstanceType != "" || sc != nil, p+".instanceType") && v.InstanceType != "" {
		if _, err := a.opts.Catalog.InstanceType(v.InstanceType); err != nil {
			ve.Add(v.InstanceType, p+".instanceType", "Member must satisfy enum value set: ["+strings.Join(a.opts.Catalog.InstanceTypeNames(), ", ")+"]")
		}
	}
	if ve.Required(count != nil || sc != nil, p+".initialInstanceCount") && count != nil {
		ve.IntRange(count, 1, endpoint.MaxInstancesPerVariant, p+".initialInstanceCount")
	}
	ve.minFloat(v.InitialVariantWeight, 0, p+".initialVariantWeight")
	if v.RoutingConfig != nil {
		ve.enum(v.RoutingConfig.RoutingStrategy, p+".routingConfig.routingStrategy", "LEAST_OUTSTANDING_REQUESTS", "RANDOM")
	}
	ve.IntRange(v.VolumeSizeInGB, 1, 512, p+".volumeSizeInGB")
	for _, t := range []struct {
		v    *int
		name string
	}{{v.ModelDataDownloadTimeoutInSeconds, "modelDataDownloadTimeoutInSeconds"}, {v.ContainerStartupHealthCheckTimeoutInSeconds, "containerStartupHealthCheckTimeoutInSeconds"}} {
		ve.IntRange(t.v, 60, 3600, p+"."+t.name)
	}
	if c := v.CapacityReservationConfig; c != nil {
		ve.enum(c.CapacityReservationPreference, p+".capacityReservationConfig.capacityReservationPreference", "capacity-reservations-only")
		if c.MlReservationArn != "" && (len(c.MlReservationArn) < 20 || len(c.MlReservationArn) > 258 || !patReservation.MatchString(c.MlReservationArn)) {
			ve.Add(c.MlReservationArn, p+".capacityReservationConfig.mlReservationArn",
				`Member must satisfy regular expression pattern: ^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.*`)
		}
	}
}

func (a *API) createEndpointConfig(ctx context.Context, body []byte) (any, error) {
	var in createEndpointConfigInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.EndpointConfigName, "endpointConfigName", patResourceName, patResourceNameText)
	if ve.Required(in.ProductionVariants != nil, "productionVariants") {
		ve.listLen(len(in.ProductionVariants), 1, endpoint.MaxVariants, "productionVariants")
	}
	if len(in.ProductionVariants) > endpoint.MaxVariants {
		// Report the length alone: checking each member would make the
		// message (and the work) grow with a list the request may not have.
		return nil, ve.Err()
	}
	// A second look at the variants tells an absent InitialInstanceCount from 0.
	var counts struct {
		ProductionVariants []struct {
			InitialInstanceCount *int             `json:"InitialInstanceCount"`
			ServerlessConfig     *serverlessInput `json:"ServerlessConfig"`
		} `json:"ProductionVariants"`
	}
	_ = json.Unmarshal(body, &counts)
	for i := range in.ProductionVariants {
		var count *int
		var sc *serverlessInput
		if i < len(counts.ProductionVariants) {
			count, sc = counts.ProductionVariants[i].InitialInstanceCount, counts.ProductionVariants[i].ServerlessConfig
		}
		a.validateVariant(&ve, &in.ProductionVariants[i], count, sc, i)
	}
	ve.maxLen(in.KmsKeyId, 2048, "kmsKeyId")
	ve.tags(in.Tags)
	asyncWarn := validateAsync(&ve, in.AsyncInferenceConfig)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	for _, v := range in.ProductionVariants {
		if c := v.CapacityReservationConfig; c != nil {
			if why := a.foreignPlan(c.MlReservationArn); why != "" {
				return nil, awsjson.Validationf("Variant %s: MlReservationArn %s.", v.VariantName, why)
			}
		}
	}
	c, err := a.svc.CreateEndpointConfig(ctx, endpoint.EndpointConfig{Name: *in.EndpointConfigName,
		ProductionVariants: in.ProductionVariants, DataCaptureConfig: in.DataCaptureConfig,
		AsyncInferenceConfig: in.AsyncInferenceConfig, KmsKeyId: in.KmsKeyId, ExecutionRoleArn: in.ExecutionRoleArn,
		EnableNetworkIsolation: in.EnableNetworkIsolation, Tags: in.Tags})
	if err != nil {
		return nil, err
	}
	a.warnIgnored("CreateEndpointConfig", asyncWarn)
	return map[string]string{"EndpointConfigArn": a.arn(endpoint.ResConfig, c.Name)}, nil
}

type variantOut struct {
	endpoint.Variant
	InitialVariantWeight float64 `json:"InitialVariantWeight"`
}

func (a *API) describeEndpointConfig(ctx context.Context, body []byte) (any, error) {
	name, err := configName.of(body)
	if err != nil {
		return nil, err
	}
	c, err := a.svc.GetEndpointConfig(ctx, name)
	if err != nil {
		return nil, err
	}
	vs := make([]variantOut, len(c.ProductionVariants))
	for i, v := range c.ProductionVariants {
		vs[i] = variantOut{Variant: v, InitialVariantWeight: v.Weight()}
	}
	return struct {
		EndpointConfigName     string          `json:"EndpointConfigName"`
		EndpointConfigArn      string          `json:"EndpointConfigArn"`
		ProductionVariants     []variantOut    `json:"ProductionVariants"`
		CreationTime           *Epoch          `json:"CreationTime"`
		DataCaptureConfig      json.RawMessage `json:"DataCaptureConfig,omitempty"`
		AsyncInferenceConfig   json.RawMessage `json:"AsyncInferenceConfig,omitempty"`
		KmsKeyId               string          `json:"KmsKeyId,omitempty"`
		ExecutionRoleArn       string          `json:"ExecutionRoleArn,omitempty"`
		EnableNetworkIsolation bool            `json:"EnableNetworkIsolation"`
	}{c.Name, a.arn(endpoint.ResConfig, c.Name), vs, awsjson.EpochOf(c.CreationTime), c.DataCaptureConfig,
		c.AsyncInferenceConfig, c.KmsKeyId, c.ExecutionRoleArn, c.EnableNetworkIsolation}, nil
}

func (a *API) listEndpointConfigs(ctx context.Context, body []byte) (any, error) {
	return list(ctx, body, "EndpointConfigs", a.svc.ListEndpointConfigs, func(c endpoint.EndpointConfig) summary {
		return summary{Kind: "EndpointConfig", Name: c.Name, Arn: a.arn(endpoint.ResConfig, c.Name), CreationTime: Epoch{Time: c.CreationTime}}
	}, "Name", "CreationTime")
}
