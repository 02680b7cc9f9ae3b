package tagging

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/store"
)

// things is a Resolver over a bucket of records that carry their tags.
type things struct{}

type thing struct{ Tags []Tag }

func (things) Bucket() string { return "things" }

func (things) Find(tx *store.Tx, id string) (Ref, []Tag, bool, error) {
	var t thing
	found, err := tx.Get("things", id, &t)
	return Ref{Bucket: "things", Key: id}, t.Tags, found, err
}

var _ Resolver = things{}

func newService(t *testing.T) (*Service, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(st, Options{Region: "eu-west-1", AccountID: "123456789012", Resolvers: map[string]Resolver{"thing": things{}}}), st
}

const arnA = "arn:aws:sagemaker:eu-west-1:123456789012:thing/a"

func put(t *testing.T, st *store.Store, name string, tags ...Tag) {
	t.Helper()
	if err := st.Update(func(tx *store.Tx) error { return tx.Put("things", name, thing{tags}) }); err != nil {
		t.Fatal(err)
	}
}

func TestServiceFindsOnlyItsOwnARNs(t *testing.T) {
	s, st := newService(t)
	put(t, st, "a", Tag{"k", "v"})
	for _, arn := range []string{
		"arn:aws:sagemaker:us-east-1:123456789012:thing/a", // region
		"arn:aws:sagemaker:eu-west-1:000000000000:thing/a", // account
		"arn:aws-cn:sagemaker:eu-west-1:123456789012:thing/a",
		"arn:aws:sagemaker:eu-west-1:123456789012:thing/b", // missing
		"arn:aws:sagemaker:eu-west-1:123456789012:thing/",
		"arn:aws:sagemaker:eu-west-1:123456789012:thing",
	} {
		if _, err := s.List(context.Background(), arn); !IsNotFound(err) {
			t.Errorf("List(%s) = %v, want NotFoundError", arn, err)
		}
	}
	var nf *NotFoundError
	if _, err := s.List(context.Background(), "arn:aws:sagemaker:eu-west-1:123456789012:other/a"); !errors.As(err, &nf) || nf.Type != "other" {
		t.Errorf("unknown type: %v", err)
	}
}

func TestServiceMergeLimitAndDelete(t *testing.T) {
	s, st := newService(t)
	ctx := context.Background()
	var tags []Tag
	for i := range MaxTags - 1 {
		tags = append(tags, Tag{string(rune('A' + i)), "v"})
	}
	put(t, st, "a", tags...)
	// 49 + 2 new: refused, nothing written.
	err := s.Add(ctx, arnA, []Tag{{"x", "1"}, {"y", "2"}})
	var le *LimitError
	if !errors.As(err, &le) || le.Have != 49 || le.New != 2 || le.Max != MaxTags {
		t.Fatalf("Add over the limit: %v", err)
	}
	if err := st.View(func(tx *store.Tx) error {
		if tx.Exists(KindTags, "things/a") {
			t.Fatal("a refused Add stored a tag set")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// One overwritten in place, one new at the end, the later duplicate wins.
	if err := s.Add(ctx, arnA, []Tag{{"B", "new"}, {"x", "1"}, {"x", "2"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, arnA)
	if err != nil || len(got) != MaxTags || got[1] != (Tag{"B", "new"}) || got[MaxTags-1] != (Tag{"x", "2"}) {
		t.Fatalf("after Add: %v %v", got, err)
	}
	if err := s.Delete(ctx, arnA, []string{"B", "nope"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.List(ctx, arnA)
	if len(got) != MaxTags-1 || slices.ContainsFunc(got, func(t Tag) bool { return t.Key == "B" }) {
		t.Fatalf("after Delete: %v", got)
	}
	// The record's delete takes the tag set with it; a new record under the
	// name starts from its own tags.
	if err := st.Update(func(tx *store.Tx) error { return tx.Delete("things", "a") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, arnA); !IsNotFound(err) {
		t.Fatalf("List after delete: %v", err)
	}
	put(t, st, "a", Tag{"fresh", "1"})
	if got, err := s.List(ctx, arnA); err != nil || !slices.Equal(got, []Tag{{"fresh", "1"}}) {
		t.Fatalf("recreated: %v %v", got, err)
	}
}
