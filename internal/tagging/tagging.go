package tagging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/store"
)

// KindTags is the store bucket of changed tag sets, keyed Ref.ID().
const KindTags = "tags"

// MaxTags is the most tags one resource has.
const MaxTags = 50

// Tag is a key/value label.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// Ref is where a resource's record is stored.
type Ref struct {
	Bucket string // store kind of the record
	Key    string // its key there
}

// ID is the key of the resource's tag set in KindTags.
func (r Ref) ID() string { return r.Bucket + "/" + r.Key }

// Resolver finds the resources of one ARN resource type. Both methods run
// inside the caller's transaction and only read.
type Resolver interface {
	// Bucket is the store kind of the records this resolver finds; the
	// service forgets a record's tags when a key of it is deleted.
	Bucket() string
	// Find returns the record that id (the ARN's part after "type/") names
	// and its create-time tags; found is false when there is none. An error
	// is a store failure.
	Find(tx *store.Tx, id string) (ref Ref, created []Tag, found bool, err error)
}

// NotFoundError says an ARN names no resource capstan has: its type is not
// taggable here, its region or account is not this server's, or the
// resource does not exist (any more).
type NotFoundError struct {
	ARN string
	// Type is the ARN's resource type when capstan has no resources of it
	// ("" otherwise).
	Type string
}

func (e *NotFoundError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("tagging: %s: capstan has no resources of type %q", e.ARN, e.Type)
	}
	return fmt.Sprintf("tagging: %s does not exist", e.ARN)
}

// LimitError says a change would leave a resource with more than Max tags.
type LimitError struct {
	ARN  string
	Have int // tags the resource has
	New  int // keys the change adds
	Max  int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("tagging: %s has %d tags and the change adds %d keys; the limit is %d", e.ARN, e.Have, e.New, e.Max)
}

// Options configure a Service.
type Options struct {
	// Region and AccountID are the ones in this server's ARNs; an ARN with
	// others names nothing here.
	Region    string
	AccountID string
	// Resolvers by ARN resource type ("model", "endpoint-config",
	// "endpoint", "training-plan", "cluster").
	Resolvers map[string]Resolver
}

// Service reads and changes tags. It is safe for concurrent use.
type Service struct {
	st *store.Store
	o  Options
}

// New returns the tag service over st and registers, for each resolver's
// bucket, the hook that deletes a record's tag set with the record. Call it
// once per store, at wiring time.
func New(st *store.Store, o Options) *Service {
	seen := map[string]bool{}
	for _, r := range o.Resolvers {
		b := r.Bucket()
		if seen[b] {
			continue
		}
		seen[b] = true
		st.OnDelete(b, func(tx *store.Tx, key string) error {
			return tx.Delete(KindTags, Ref{Bucket: b, Key: key}.ID())
		})
	}
	return &Service{st: st, o: o}
}

type tagSet struct {
	Tags []Tag `json:"tags"`
}

// find resolves arn inside tx to its record and current tags.
func (s *Service) find(tx *store.Tx, arn string) (Ref, []Tag, error) {
	typ, id, ok := s.parse(arn)
	if !ok {
		return Ref{}, nil, &NotFoundError{ARN: arn}
	}
	r, ok := s.o.Resolvers[typ]
	if !ok {
		return Ref{}, nil, &NotFoundError{ARN: arn, Type: typ}
	}
	ref, created, found, err := r.Find(tx, id)
	if err != nil {
		return Ref{}, nil, fmt.Errorf("tagging: find %s: %w", arn, err)
	}
	if !found {
		return Ref{}, nil, &NotFoundError{ARN: arn}
	}
	var set tagSet
	changed, err := tx.Get(KindTags, ref.ID(), &set)
	if err != nil {
		return Ref{}, nil, fmt.Errorf("tagging: %w", err)
	}
	if !changed {
		return ref, slices.Clone(created), nil
	}
	return ref, set.Tags, nil
}

// parse splits "arn:aws:sagemaker:<region>:<account>:<type>/<id>"; ok is
// false when arn is not one of this server's.
func (s *Service) parse(arn string) (typ, id string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] != "aws" || parts[2] != "sagemaker" ||
		parts[3] != s.o.Region || parts[4] != s.o.AccountID {
		return "", "", false
	}
	typ, id, ok = strings.Cut(parts[5], "/")
	return typ, id, ok && typ != "" && id != ""
}

// List returns the tags of the resource arn names, in the order they were
// added.
func (s *Service) List(_ context.Context, arn string) ([]Tag, error) {
	var tags []Tag
	err := s.st.View(func(tx *store.Tx) error {
		var err error
		_, tags, err = s.find(tx, arn)
		return err
	})
	return tags, err
}

// Add sets tags on the resource arn names: a key it has gets the new value
// in place, a new key goes last. It is one transaction; a NotFoundError or
// a LimitError (more than MaxTags afterwards) changes nothing. Later
// entries of tags win over earlier ones with the same key.
func (s *Service) Add(_ context.Context, arn string, tags []Tag) error {
	return s.st.Update(func(tx *store.Tx) error {
		ref, cur, err := s.find(tx, arn)
		if err != nil {
			return err
		}
		have := len(cur)
		for _, t := range tags {
			if i := slices.IndexFunc(cur, func(c Tag) bool { return c.Key == t.Key }); i >= 0 {
				cur[i].Value = t.Value
				continue
			}
			cur = append(cur, t)
		}
		if len(cur) > MaxTags {
			return &LimitError{ARN: arn, Have: have, New: len(cur) - have, Max: MaxTags}
		}
		return tx.Put(KindTags, ref.ID(), tagSet{Tags: cur})
	})
}

// Delete removes keys from the resource arn names; keys it does not have
// are ignored. It is one transaction; a NotFoundError changes nothing.
func (s *Service) Delete(_ context.Context, arn string, keys []string) error {
	return s.st.Update(func(tx *store.Tx) error {
		ref, cur, err := s.find(tx, arn)
		if err != nil {
			return err
		}
		cur = slices.DeleteFunc(cur, func(t Tag) bool { return slices.Contains(keys, t.Key) })
		if cur == nil {
			cur = []Tag{}
		}
		return tx.Put(KindTags, ref.ID(), tagSet{Tags: cur})
	})
}

// IsNotFound reports whether err is (or wraps) a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}
