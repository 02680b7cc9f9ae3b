package awsjson

import (
	"encoding/base64"
	"testing"
)

func TestPage(t *testing.T) {
	three := 3
	tests := []struct {
		name       string
		n, def     int
		max        *int
		wantPages  [][2]int // [start, end) of each page, following NextToken
		firstToken string
	}{
		{"default size", 5, 2, nil, [][2]int{{0, 2}, {2, 4}, {4, 5}}, ""},
		{"MaxResults", 7, 2, &three, [][2]int{{0, 3}, {3, 6}, {6, 7}}, ""},
		{"exact fit", 3, 3, nil, [][2]int{{0, 3}}, ""},
		{"nothing", 0, 10, nil, [][2]int{{0, 0}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Paging{MaxResults: tt.max, NextToken: tt.firstToken}
			for i, want := range tt.wantPages {
				start, end, next, ok := p.Page(tt.n, tt.def)
				if !ok || start != want[0] || end != want[1] {
					t.Fatalf("page %d = [%d, %d) ok=%v, want %v", i, start, end, ok, want)
				}
				if last := i == len(tt.wantPages)-1; (next == "") != last {
					t.Fatalf("page %d: NextToken %q, last %v", i, next, last)
				}
				p.NextToken = next
			}
		})
	}
}

func TestPageRefusesForeignTokens(t *testing.T) {
	p := Paging{}
	_, _, tok, _ := p.Page(5, 4) // the token of offset 4
	tests := []struct {
		name, token string
		n           int
	}{
		{"not base64", "garbage!", 10},
		{"not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")), 10},
		{"negative offset", base64.RawURLEncoding.EncodeToString([]byte(`{"o":-1}`)), 10},
		{"fractional offset", base64.RawURLEncoding.EncodeToString([]byte(`{"o":1.5}`)), 10},
		{"past the items", tok, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, ok := (Paging{NextToken: tt.token}).Page(tt.n, 10); ok {
				t.Fatalf("Page accepted %q for %d items", tt.token, tt.n)
			}
		})
	}
	if off, ok := ParseToken(tok); !ok || off != 4 {
		t.Fatalf("ParseToken(%q) = %d, %v", tok, off, ok)
	}
	if off, ok := ParseToken(""); !ok || off != 0 {
		t.Fatalf(`ParseToken("") = %d, %v`, off, ok)
	}
}

func TestCheckMaxResults(t *testing.T) {
	for _, tt := range []struct {
		v    int
		want string
	}{
		{0, "1 validation error detected: Value '0' at 'maxResults' failed to satisfy constraint: Member must have value greater than or equal to 1"},
		{1, ""},
		{50, ""},
		{51, "1 validation error detected: Value '51' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 50"},
	} {
		var ve Violations
		Paging{MaxResults: &tt.v}.CheckMaxResults(&ve, 50)
		got := ""
		if err := ve.Err(); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Fatalf("MaxResults %d: %q, want %q", tt.v, got, tt.want)
		}
	}
}
