package sagemaker

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// listInput is the common shape of the List* operations.
type listInput struct {
	SortBy                 string `json:"SortBy"`
	SortOrder              string `json:"SortOrder"`
	NextToken              string `json:"NextToken"`
	MaxResults             *int   `json:"MaxResults"`
	NameContains           string `json:"NameContains"`
	CreationTimeBefore     *Epoch `json:"CreationTimeBefore"`
	CreationTimeAfter      *Epoch `json:"CreationTimeAfter"`
	LastModifiedTimeBefore *Epoch `json:"LastModifiedTimeBefore"`
	LastModifiedTimeAfter  *Epoch `json:"LastModifiedTimeAfter"`
	StatusEquals           string `json:"StatusEquals"`
}

func (in *listInput) paging() awsjson.Paging {
	return awsjson.Paging{NextToken: in.NextToken, MaxResults: in.MaxResults}
}

var endpointStatuses = []string{"OutOfService", "Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "Deleting", "Failed", "UpdateRollbackFailed"}

func (in *listInput) validate(sortKeys ...string) error {
	var ve validationError
	ve.enum(in.SortBy, "sortBy", sortKeys...)
	ve.enum(in.SortOrder, "sortOrder", "Ascending", "Descending")
	in.paging().CheckMaxResults(&ve.Violations, 100)
	ve.maxLen(in.NextToken, 8192, "nextToken")
	if in.NameContains != "" {
		ve.maxLen(in.NameContains, 63, "nameContains")
		if !patNameContains.MatchString(in.NameContains) {
			ve.Add(in.NameContains, "nameContains", "Member must satisfy regular expression pattern: "+patNameContainsText)
		}
	}
	ve.enum(in.StatusEquals, "statusEquals", endpointStatuses...)
	return ve.Err()
}

// summary is a model, endpoint configuration or endpoint as a List*
// operation filters, sorts and answers with it: SageMaker's ModelSummary,
// EndpointConfigSummary and EndpointSummary, the same record with the kind in
// its member names ("ModelName", "EndpointConfigArn"). Only endpoints have a
// status (and LastModifiedTime).
type summary struct {
	Kind         string // "Model", "EndpointConfig" or "Endpoint"
	Name         string
	Arn          string
	CreationTime Epoch
	Modified     Epoch
	Status       string
}

// MarshalJSON writes the members in SageMaker's order.
func (s summary) MarshalJSON() ([]byte, error) {
	members := []any{s.Kind + "Name", s.Name, s.Kind + "Arn", s.Arn, "CreationTime", s.CreationTime}
	if s.Kind == "Endpoint" {
		members = append(members, "LastModifiedTime", s.Modified, "EndpointStatus", s.Status)
	}
	b := []byte{'{'}
	for i := 0; i < len(members); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(members[i])
		v, err := json.Marshal(members[i+1])
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// list is a List* operation: decode and check the request, read the
// resources, filter, sort and page their summaries, and answer with the page
// under member (and NextToken unless it is the last).
func list[T any](ctx context.Context, body []byte, member string, read func(context.Context) ([]T, error), sum func(T) summary, sortKeys ...string) (any, error) {
	var in listInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.validate(sortKeys...); err != nil {
		return nil, err
	}
	rs, err := read(ctx)
	if err != nil {
		return nil, err
	}
	items := make([]summary, len(rs))
	for i, r := range rs {
		items[i] = sum(r)
	}
	page, next, err := in.apply(items)
	if err != nil {
		return nil, err
	}
	out := map[string]any{member: append([]summary{}, page...)}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

// apply filters, sorts and pages items. The default order is CreationTime,
// Descending, as in SageMaker.
func (in *listInput) apply(items []summary) ([]summary, string, error) {
	var kept []summary
	for _, s := range items {
		if in.NameContains != "" && !strings.Contains(strings.ToLower(s.Name), strings.ToLower(in.NameContains)) {
			continue
		}
		if in.StatusEquals != "" && s.Status != in.StatusEquals {
			continue
		}
		if in.CreationTimeBefore != nil && !s.CreationTime.Before(in.CreationTimeBefore.Time) {
			continue
		}
		if in.CreationTimeAfter != nil && !s.CreationTime.After(in.CreationTimeAfter.Time) {
			continue
		}
		if in.LastModifiedTimeBefore != nil && !s.Modified.Before(in.LastModifiedTimeBefore.Time) {
			continue
		}
		if in.LastModifiedTimeAfter != nil && !s.Modified.After(in.LastModifiedTimeAfter.Time) {
			continue
		}
		kept = append(kept, s)
	}
	less := func(i, j int) bool {
		a, b := kept[i], kept[j]
		switch in.SortBy {
		case "Name":
			return a.Name < b.Name
		case "Status":
			if a.Status != b.Status {
				return a.Status < b.Status
			}
			return a.Name < b.Name
		default:
			if !a.CreationTime.Equal(b.CreationTime.Time) {
				return a.CreationTime.Before(b.CreationTime.Time)
			}
			return a.Name < b.Name
		}
	}
	if in.SortOrder == "Ascending" {
		sort.SliceStable(kept, less)
	} else {
		sort.SliceStable(kept, func(i, j int) bool { return less(j, i) })
	}
	start, end, next, ok := in.paging().Page(len(kept), 10)
	if !ok {
		return nil, "", awsjson.Validationf("Invalid pagination token because \"%s\" is not a token this server issued.", in.NextToken)
	}
	return kept[start:end], next, nil
}
