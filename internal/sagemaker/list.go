package sagemaker

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
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

var endpointStatuses = []string{"OutOfService", "Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "Deleting", "Failed", "UpdateRollbackFailed"}

func (in *listInput) validate(sortKeys ...string) error {
	var ve validationError
	ve.enum(in.SortBy, "sortBy", sortKeys...)
	ve.enum(in.SortOrder, "sortOrder", "Ascending", "Descending")
	ve.minInt(in.MaxResults, 1, "maxResults")
	ve.maxInt(in.MaxResults, 100, "maxResults")
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

type pageToken struct {
	Offset int `json:"o"`
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
	off := 0
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		var t pageToken
		if err == nil {
			err = json.Unmarshal(raw, &t)
		}
		if err != nil || t.Offset < 0 || t.Offset > len(kept) {
			return nil, "", newWireError(http.StatusBadRequest, CodeValidation, "Invalid pagination token because \"%s\" is not a token this server issued.", in.NextToken)
		}
		off = t.Offset
	}
	limit := 10
	if in.MaxResults != nil {
		limit = *in.MaxResults
	}
	end := min(off+limit, len(kept))
	next := ""
	if end < len(kept) {
		raw, _ := json.Marshal(pageToken{Offset: end})
		next = base64.RawURLEncoding.EncodeToString(raw)
	}
	return kept[off:end], next, nil
}
