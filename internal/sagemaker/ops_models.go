package sagemaker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

type nameInput struct {
	ModelName          *string `json:"ModelName"`
	EndpointConfigName *string `json:"EndpointConfigName"`
	EndpointName       *string `json:"EndpointName"`
}

// named is how requests name one kind of resource: the member, its wire path
// and its pattern.
type named struct {
	member  func(*nameInput) *string
	path    string
	pat     *regexp.Regexp
	patText string
}

var (
	modelName    = named{func(in *nameInput) *string { return in.ModelName }, "modelName", patModelName, patModelNameText}
	configName   = named{func(in *nameInput) *string { return in.EndpointConfigName }, "endpointConfigName", patResourceName, patResourceNameText}
	endpointName = named{func(in *nameInput) *string { return in.EndpointName }, "endpointName", patResourceName, patResourceNameText}
)

// of decodes a request that names one resource and checks the name.
func (n named) of(body []byte) (string, error) {
	var in nameInput
	if err := decode(body, &in); err != nil {
		return "", err
	}
	v := n.member(&in)
	var ve validationError
	ve.name(v, n.path, n.pat, n.patText)
	if err := ve.Err(); err != nil {
		return "", err
	}
	return *v, nil
}

// deleteOp is a Delete* operation: del deletes the resource the request
// names; the output is {}.
func deleteOp(n named, del func(context.Context, string) error) awsjson.Op {
	return func(ctx context.Context, body []byte) (any, error) {
		name, err := n.of(body)
		if err != nil {
			return nil, err
		}
		return nil, del(ctx, name)
	}
}

func (e *validationError) container(c *endpoint.Container, path string) {
	e.maxLen(c.ContainerHostname, 63, path+".containerHostname")
	e.maxLen(c.Image, 255, path+".image")
	e.maxLen(c.ModelDataUrl, 1024, path+".modelDataUrl")
	if len(c.ModelDataSource) > 0 {
		var ds struct {
			S3DataSource *struct {
				S3Uri string `json:"S3Uri"`
			} `json:"S3DataSource"`
		}
		if json.Unmarshal(c.ModelDataSource, &ds) == nil && ds.S3DataSource != nil {
			e.maxLen(ds.S3DataSource.S3Uri, 1024, path+".modelDataSource.s3DataSource.s3Uri")
		}
	}
	e.enum(c.Mode, path+".mode", "SingleModel", "MultiModel")
	e.environment(c.Environment, path+".environment")
}

// patEnvKey is SageMaker's pattern for a container Environment key.
var patEnvKey = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// environment applies SageMaker's own constraints on a container's
// Environment map (≤100 entries, keys ≤1024 matching patEnvKey, values
// ≤1024), reporting the first bad key and value in key order. capstan's
// deny-list of loader and runtime variables (package procenv) does not apply
// here: the map only names the model (HF_MODEL_ID, SM_MODEL_ID) and never
// reaches an engine process, and refusing names real SageMaker accepts would
// break compatible clients for no protection.
func (e *validationError) environment(env map[string]string, path string) {
	if len(env) > 100 {
		e.Add(fmt.Sprintf("[%d entries]", len(env)), path, "Member must have length less than or equal to 100")
	}
	badKey, badValue := false, false
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !badKey && (len(k) > 1024 || !patEnvKey.MatchString(k)) {
			badKey = true
			e.Add(k, path, "Map keys must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]")
		}
		if v := env[k]; !badValue && len(v) > 1024 {
			badValue = true
			e.Add(v, path, "Map value must satisfy constraint: [Member must have length less than or equal to 1024]")
		}
	}
}

type createModelInput struct {
	ModelName                *string              `json:"ModelName"`
	PrimaryContainer         *endpoint.Container  `json:"PrimaryContainer"`
	Containers               []endpoint.Container `json:"Containers"`
	ExecutionRoleArn         string               `json:"ExecutionRoleArn"`
	EnableNetworkIsolation   bool                 `json:"EnableNetworkIsolation"`
	InferenceExecutionConfig json.RawMessage      `json:"InferenceExecutionConfig"`
	VpcConfig                json.RawMessage      `json:"VpcConfig"`
	Tags                     []endpoint.Tag       `json:"Tags"`
}

func (a *API) createModel(ctx context.Context, body []byte) (any, error) {
	var in createModelInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.ModelName, "modelName", patModelName, patModelNameText)
	ve.listLen(len(in.Containers), 0, 15, "containers")
	if in.PrimaryContainer != nil {
		ve.container(in.PrimaryContainer, "primaryContainer")
	}
	for i := range in.Containers {
		ve.container(&in.Containers[i], fmt.Sprintf("containers.%d.member", i+1))
	}
	ve.maxLen(in.ExecutionRoleArn, 2048, "executionRoleArn")
	ve.tags(in.Tags)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	m, err := a.svc.CreateModel(ctx, endpoint.Model{Name: *in.ModelName, PrimaryContainer: in.PrimaryContainer,
		Containers: in.Containers, ExecutionRoleArn: in.ExecutionRoleArn, EnableNetworkIsolation: in.EnableNetworkIsolation,
		InferenceExecutionConfig: in.InferenceExecutionConfig, VpcConfig: in.VpcConfig, Tags: in.Tags})
	if err != nil {
		return nil, err
	}
	return map[string]string{"ModelArn": a.arn(endpoint.ResModel, m.Name)}, nil
}

type describeModelOutput struct {
	ModelName                string               `json:"ModelName"`
	ModelArn                 string               `json:"ModelArn"`
	CreationTime             *Epoch               `json:"CreationTime"`
	PrimaryContainer         *endpoint.Container  `json:"PrimaryContainer,omitempty"`
	Containers               []endpoint.Container `json:"Containers,omitempty"`
	ExecutionRoleArn         string               `json:"ExecutionRoleArn,omitempty"`
	EnableNetworkIsolation   bool                 `json:"EnableNetworkIsolation"`
	InferenceExecutionConfig json.RawMessage      `json:"InferenceExecutionConfig,omitempty"`
	VpcConfig                json.RawMessage      `json:"VpcConfig,omitempty"`
}

func (a *API) describeModel(ctx context.Context, body []byte) (any, error) {
	name, err := modelName.of(body)
	if err != nil {
		return nil, err
	}
	m, err := a.svc.GetModel(ctx, name)
	if err != nil {
		return nil, err
	}
	return describeModelOutput{ModelName: m.Name, ModelArn: a.arn(endpoint.ResModel, m.Name), CreationTime: awsjson.EpochOf(m.CreationTime),
		PrimaryContainer: m.PrimaryContainer, Containers: m.Containers, ExecutionRoleArn: m.ExecutionRoleArn,
		EnableNetworkIsolation: m.EnableNetworkIsolation, InferenceExecutionConfig: m.InferenceExecutionConfig, VpcConfig: m.VpcConfig}, nil
}

func (a *API) listModels(ctx context.Context, body []byte) (any, error) {
	return list(ctx, body, "Models", a.svc.ListModels, func(m endpoint.Model) summary {
		return summary{Kind: "Model", Name: m.Name, Arn: a.arn(endpoint.ResModel, m.Name), CreationTime: Epoch{Time: m.CreationTime}}
	}, "Name", "CreationTime")
}
