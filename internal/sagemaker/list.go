package sagemaker

import (
	"context"
	"sort"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// listInput is the common shape of the List* operations.
type listInput struct {
	SortBy    string `json:"SortBy"`
	SortOrder string `json:"SortOrder"`
	awsjson.Paging
	NameContains           string `json:"NameContains"`
	CreationTimeBefore     *Epoch `json:"CreationTimeBefore"`
	CreationTimeAfter      *Epoch `json:"CreationTimeAfter"`
	LastModifiedTimeBefore *Epoch `json:"LastModifiedTimeBefore"`
	LastModifiedTimeAfter  *Epoch `json:"LastModifiedTimeAfter"`
	StatusEquals           string `json:"StatusEquals"`
}

var endpointStatuses = []string{"OutOfService", "Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "Deleting", "Failed", "UpdateRollbackFailed"}

func (in *listInput) validate(sortKeys ...string) error {
	var ve validationError
	ve.enum(in.SortBy, "sortBy", sortKeys...)
	ve.enum(in.SortOrder, "sortOrder", "Ascending", "Descending")
	in.CheckMaxResults(&ve.Violations, 100)
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

// summary is what the List* operations filter, sort and page on.
type summary struct {
	Name         string
	Arn          string
	CreationTime Epoch
	Modified     Epoch
	Status       string
}

// listPage is a List* operation up to its output: decode and check the
// request, then list the resources and filter, sort and page their
// summaries.
func listPage[T any](ctx context.Context, body []byte, list func(context.Context) ([]T, error), sum func(T) summary, sortKeys ...string) ([]summary, string, error) {
	var in listInput
	if err := decode(body, &in); err != nil {
		return nil, "", err
	}
	if err := in.validate(sortKeys...); err != nil {
		return nil, "", err
	}
	rs, err := list(ctx)
	if err != nil {
		return nil, "", err
	}
	items := make([]summary, len(rs))
	for i, r := range rs {
		items[i] = sum(r)
	}
	return in.apply(items)
}

// listOutput is a List* output: the page's wire summaries under member, and
// NextToken unless the page is the last.
func listOutput[W any](member string, page []summary, next string, wire func(summary) W) map[string]any {
	ws := make([]W, len(page))
	for i, s := range page {
		ws[i] = wire(s)
	}
	out := map[string]any{member: ws}
	if next != "" {
		out["NextToken"] = next
	}
	return out
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
	start, end, next, ok := in.Page(len(kept), 10)
	if !ok {
		return nil, "", awsjson.Validationf("Invalid pagination token because \"%s\" is not a token this server issued.", in.NextToken)
	}
	return kept[start:end], next, nil
}
