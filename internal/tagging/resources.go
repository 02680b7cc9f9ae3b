package tagging

import (
	"strings"

	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/store"
)

// Resolvers are the resolvers of every taggable resource capstan has, by
// ARN resource type, for Options.Resolvers.
func Resolvers() map[string]Resolver {
	return map[string]Resolver{
		"model":           endpointKind[endpoint.Model]{endpoint.KindModel, func(m endpoint.Model) []endpoint.Tag { return m.Tags }},
		"endpoint-config": endpointKind[endpoint.EndpointConfig]{endpoint.KindConfig, func(c endpoint.EndpointConfig) []endpoint.Tag { return c.Tags }},
		"endpoint":        endpointKind[endpoint.Endpoint]{endpoint.KindEndpoint, func(e endpoint.Endpoint) []endpoint.Tag { return e.Tags }},
		"training-plan":   plans{},
		"cluster":         clusters{},
	}
}

// endpointKind finds models, endpoint configurations and endpoints: records
// of package endpoint stored under their name, which their ARN lower-cases.
type endpointKind[T any] struct {
	bucket string
	tags   func(T) []endpoint.Tag
}

var _ Resolver = endpointKind[endpoint.Model]{}

func (k endpointKind[T]) Bucket() string { return k.bucket }

func (k endpointKind[T]) Find(tx *store.Tx, id string) (Ref, []Tag, bool, error) {
	key, ok, err := foldKey(tx, k.bucket, id)
	if err != nil || !ok {
		return Ref{}, nil, false, err
	}
	var v T
	found, err := tx.Get(k.bucket, key, &v)
	if err != nil || !found {
		return Ref{}, nil, false, err
	}
	var out []Tag
	for _, t := range k.tags(v) {
		out = append(out, Tag(t))
	}
	return Ref{Bucket: k.bucket, Key: key}, out, true, nil
}

// foldKey is the key of bucket that id names: id itself, or else the first
// key (in key order) equal to it under case folding, as names with capitals
// have lower-case ARNs.
func foldKey(tx *store.Tx, bucket, id string) (string, bool, error) {
	if tx.Exists(bucket, id) {
		return id, true, nil
	}
	var key string
	err := tx.Each(bucket, func(name string, _ []byte) error {
		if key == "" && strings.EqualFold(name, id) {
			key = name
		}
		return nil
	})
	return key, key != "", err
}

// plans finds training plans, stored under their lower-cased name.
type plans struct{}

var _ Resolver = plans{}

func (plans) Bucket() string { return capacity.KindPlans }

func (plans) Find(tx *store.Tx, id string) (Ref, []Tag, bool, error) {
	key := strings.ToLower(id)
	var p capacity.Plan
	found, err := tx.Get(capacity.KindPlans, key, &p)
	if err != nil || !found {
		return Ref{}, nil, false, err
	}
	var out []Tag
	for _, t := range p.Tags {
		out = append(out, Tag(t))
	}
	return Ref{Bucket: capacity.KindPlans, Key: key}, out, true, nil
}

// clusters finds HyperPod clusters, whose ARNs carry their id.
type clusters struct{}

var _ Resolver = clusters{}

func (clusters) Bucket() string { return hyperpod.KindCluster }

func (clusters) Find(tx *store.Tx, id string) (Ref, []Tag, bool, error) {
	c, found, err := hyperpod.ClusterByID(tx, id)
	if err != nil || !found {
		return Ref{}, nil, false, err
	}
	var out []Tag
	for _, t := range c.Tags {
		out = append(out, Tag{Key: t.Key, Value: t.Value})
	}
	return Ref{Bucket: hyperpod.KindCluster, Key: c.Name}, out, true, nil
}
