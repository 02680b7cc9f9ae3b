package awsjson

import (
	"encoding/base64"
	"encoding/json"
)

// Paging is a list request's NextToken and MaxResults. A NextToken is
// opaque to clients: base64 of the offset where the next page starts, so a
// listing needs no server-side cursor. (Requests decode the members into
// their own fields: a decoding error names the field's struct path.)
type Paging struct {
	NextToken  string
	MaxResults *int
}

type pageToken struct {
	Offset int `json:"o"`
}

// CheckMaxResults records a MaxResults outside [1, hi].
func (p Paging) CheckMaxResults(ve *Violations, hi int) {
	ve.IntRange(p.MaxResults, 1, hi, "maxResults")
}

// Page cuts n items into the page NextToken starts (the first when it is
// empty), at most MaxResults long (def when absent). next is the token of
// the page after it, "" on the last. ok is false when NextToken is not one
// Page issued for at most n items.
func (p Paging) Page(n, def int) (start, end int, next string, ok bool) {
	start, ok = ParseToken(p.NextToken)
	if !ok || start > n {
		return 0, 0, "", false
	}
	limit := def
	if p.MaxResults != nil {
		limit = *p.MaxResults
	}
	end = min(start+limit, n)
	if end < n {
		raw, _ := json.Marshal(pageToken{Offset: end})
		next = base64.RawURLEncoding.EncodeToString(raw)
	}
	return start, end, next, true
}

// ParseToken is the offset token carries (0 for ""); ok is false when token
// is not one Page issued. It lets an operation refuse a bad token before it
// does the work of listing.
func ParseToken(token string) (offset int, ok bool) {
	if token == "" {
		return 0, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	var t pageToken
	if err != nil || json.Unmarshal(raw, &t) != nil || t.Offset < 0 {
		return 0, false
	}
	return t.Offset, true
}
