package sagemaker

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/tagging"
)

// SageMaker's tag and ResourceArn constraints.
var (
	patTag         = regexp.MustCompile(`^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`)
	patResourceArn = regexp.MustCompile(`^arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+$`)
)

const (
	patTagText         = `^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`
	patResourceArnText = `^arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+`
	// ListTags pages: SageMaker's minimum MaxResults (and default), and the
	// most one page holds here whatever a client asks for.
	tagsPageMin = 50
	tagsPageMax = 100
)

// tags checks the Tags of a create call or of AddTags: at most
// tagging.MaxTags, keys of 1 to 128 characters and values of at most 256,
// both of SageMaker's tag pattern, no key twice and none starting with
// "aws:" (reserved for AWS). Members past the limit are not looked at.
func (e *validationError) tags(tags []endpoint.Tag) {
	e.listLen(len(tags), 0, tagging.MaxTags, "tags")
	seen := map[string]bool{}
	for i, t := range tags[:min(len(tags), tagging.MaxTags)] {
		p := fmt.Sprintf("tags.%d.member", i+1)
		e.tagKey(t.Key, p+".key")
		if utf8.RuneCountInString(t.Value) > 256 {
			e.Add(t.Value, p+".value", "Member must have length less than or equal to 256")
		} else if !patTag.MatchString(t.Value) {
			e.Add(t.Value, p+".value", "Member must satisfy regular expression pattern: "+patTagText)
		}
		if seen[t.Key] {
			e.Add(t.Key, p+".key", "Member must be unique: the key is given more than once")
		}
		seen[t.Key] = true
	}
}

// tagKey checks one tag key.
func (e *validationError) tagKey(k, path string) {
	switch n := utf8.RuneCountInString(k); {
	case n < 1 || n > 128:
		e.Add(k, path, "Member must have length between 1 and 128")
	case !patTag.MatchString(k):
		e.Add(k, path, "Member must satisfy regular expression pattern: "+patTagText)
	case strings.HasPrefix(strings.ToLower(k), "aws:"):
		e.Add(k, path, "Member must not start with 'aws:': the prefix is reserved for AWS")
	}
}

// resourceArn checks a required ResourceArn.
func (e *validationError) resourceArn(v *string) {
	if !e.Required(v != nil, "resourceArn") {
		return
	}
	switch {
	case len(*v) > 256:
		e.Add(*v, "resourceArn", "Member must have length less than or equal to 256")
	case !patResourceArn.MatchString(*v):
		e.Add(*v, "resourceArn", "Member must satisfy regular expression pattern: "+patResourceArnText)
	}
}

// strategyTagFixed refuses changing endpoint.StrategyTag after creation:
// an endpoint configuration's routing strategy is read from its create-time
// tags, so an AddTags or DeleteTags of it would be listed and never obeyed.
func (e *validationError) strategyTagFixed(key, path string) {
	if key == endpoint.StrategyTag {
		e.Add(key, path, fmt.Sprintf("Member must not be %s: that tag sets an endpoint configuration's routing strategy when the "+
			"configuration is created and is not changed afterwards. Create a new endpoint configuration with the tag and "+
			"UpdateEndpoint to it", endpoint.StrategyTag))
	}
}

func (a *API) tagService() (*tagging.Service, error) {
	if a.opts.Tags == nil {
		return nil, awsjson.Errorf(http.StatusBadRequest, CodeUnknownOperation, "Tags are not enabled on this server.")
	}
	return a.opts.Tags, nil
}

func toTagging(tags []endpoint.Tag) []tagging.Tag {
	out := make([]tagging.Tag, len(tags))
	for i, t := range tags {
		out[i] = tagging.Tag(t)
	}
	return out
}

func (a *API) addTags(ctx context.Context, body []byte) (any, error) {
	svc, err := a.tagService()
	if err != nil {
		return nil, err
	}
	var in struct {
		ResourceArn *string         `json:"ResourceArn"`
		Tags        *[]endpoint.Tag `json:"Tags"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.resourceArn(in.ResourceArn)
	var tags []endpoint.Tag
	if ve.Required(in.Tags != nil, "tags") {
		tags = *in.Tags
		ve.tags(tags)
		for i, t := range tags[:min(len(tags), tagging.MaxTags)] {
			ve.strategyTagFixed(t.Key, fmt.Sprintf("tags.%d.member.key", i+1))
		}
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if err := svc.Add(ctx, *in.ResourceArn, toTagging(tags)); err != nil {
		return nil, err
	}
	return map[string]any{"Tags": append([]endpoint.Tag{}, tags...)}, nil
}

func (a *API) listTags(ctx context.Context, body []byte) (any, error) {
	svc, err := a.tagService()
	if err != nil {
		return nil, err
	}
	var in struct {
		ResourceArn *string `json:"ResourceArn"`
		NextToken   string  `json:"NextToken"`
		MaxResults  *int    `json:"MaxResults"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.resourceArn(in.ResourceArn)
	if in.MaxResults != nil && *in.MaxResults < tagsPageMin {
		ve.Add(*in.MaxResults, "maxResults", fmt.Sprintf("Member must have value greater than or equal to %d", tagsPageMin))
	}
	ve.maxLen(in.NextToken, 8192, "nextToken")
	if err := ve.Err(); err != nil {
		return nil, err
	}
	if _, ok := awsjson.ParseToken(in.NextToken); !ok {
		return nil, badToken(in.NextToken)
	}
	tags, err := svc.List(ctx, *in.ResourceArn)
	if err != nil {
		return nil, err
	}
	limit := tagsPageMin
	if in.MaxResults != nil {
		limit = min(*in.MaxResults, tagsPageMax)
	}
	start, end, next, ok := awsjson.Paging{NextToken: in.NextToken, MaxResults: &limit}.Page(len(tags), tagsPageMin)
	if !ok {
		return nil, badToken(in.NextToken)
	}
	out := map[string]any{"Tags": append([]tagging.Tag{}, tags[start:end]...)}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func badToken(token string) error {
	return awsjson.Validationf("Invalid pagination token because \"%s\" is not a token this server issued.", token)
}

func (a *API) deleteTags(ctx context.Context, body []byte) (any, error) {
	svc, err := a.tagService()
	if err != nil {
		return nil, err
	}
	var in struct {
		ResourceArn *string   `json:"ResourceArn"`
		TagKeys     *[]string `json:"TagKeys"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.resourceArn(in.ResourceArn)
	var keys []string
	if ve.Required(in.TagKeys != nil, "tagKeys") {
		keys = *in.TagKeys
		ve.listLen(len(keys), 1, tagging.MaxTags, "tagKeys")
		for i, k := range keys[:min(len(keys), tagging.MaxTags)] {
			p := fmt.Sprintf("tagKeys.%d.member", i+1)
			ve.tagKey(k, p)
			ve.strategyTagFixed(k, p)
		}
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	return nil, svc.Delete(ctx, *in.ResourceArn, keys)
}
