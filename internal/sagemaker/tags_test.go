package sagemaker

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/tagging"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// tagsEnv is the control API over real services (endpoints with their
// controller on a fake runtime, training plans, clusters, tags) and an SDK
// client of it.
type tagsEnv struct {
	c    *sm.Client
	st   *store.Store
	clk  *clock.Fake
	ctrl *endpoint.Controller
	hp   *hyperpod.Service
}

func newTagsEnv(t *testing.T) *tagsEnv {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tags := tagging.New(st, tagging.Options{Region: "eu-west-1", AccountID: "123456789012", Resolvers: tagging.Resolvers()})
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cat := catalog.Default()
	cal, err := capacity.New(st, cat, clk, fleet.Capacity{"ml.g5.xlarge": {"eu-west-1a": 8}, "ml.p5.48xlarge": {"eu-west-1a": 4}})
	if err != nil {
		t.Fatal(err)
	}
	svc := endpoint.NewService(st, cal, cat, clk, quiet)
	svc.SetReservations(cal)
	eng := serving.New(serving.Options{Runtime: fake.New(fake.WithClock(clk)), Router: gateway.New(gateway.Options{Clock: clk}),
		Logger: quiet, DrainTimeout: time.Millisecond})
	ctrl := endpoint.NewController(st, cal, eng, clk, quiet, endpoint.Options{StartTimeout: time.Minute, Reservations: cal})
	hp, err := hyperpod.New(hyperpod.Options{Store: st, Clock: clk, Logger: quiet, Catalog: cat, Capacity: cal, Plans: cal,
		PlanNodes: cal, Pool: cluster.NewPool(clk), Region: "eu-west-1", AccountID: "123456789012"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewAPI(svc, Options{AccountID: "123456789012", Region: "eu-west-1", Catalog: cat,
		Capacity: cal, Clusters: hp, Tags: tags, Logger: quiet}))
	t.Cleanup(srv.Close)
	c := sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	return &tagsEnv{c: c, st: st, clk: clk, ctrl: ctrl, hp: hp}
}

func tagList(kv ...string) []smtypes.Tag {
	var out []smtypes.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, smtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

func flat(tags []smtypes.Tag) []string {
	out := []string{}
	for _, t := range tags {
		out = append(out, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
	}
	return out
}

// create makes one resource of kind named name with tags and returns its
// ARN as the create call answers it.
func (e *tagsEnv) create(t *testing.T, kind, name string, tags []smtypes.Tag) (string, error) {
	t.Helper()
	ctx := context.Background()
	switch kind {
	case "model":
		out, err := e.c.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name), Tags: tags,
			PrimaryContainer: &smtypes.ContainerDefinition{Environment: map[string]string{"SM_MODEL_ID": "llama-3.1-8b"}}})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ModelArn), nil
	case "endpoint-config":
		if _, err := e.create(t, "model", name+"-m", nil); err != nil {
			t.Fatal(err)
		}
		out, err := e.c.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name), Tags: tags,
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("v"), ModelName: aws.String(name + "-m"),
				InstanceType: smtypes.ProductionVariantInstanceTypeMlG5Xlarge, InitialInstanceCount: aws.Int32(1)}}})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.EndpointConfigArn), nil
	case "endpoint":
		if _, err := e.c.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String(name + "-c")}); err != nil {
			if _, err := e.create(t, "endpoint-config", name+"-c", nil); err != nil {
				t.Fatal(err)
			}
		}
		out, err := e.c.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-c"), Tags: tags})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.EndpointArn), nil
	case "training-plan":
		now := e.clk.Now()
		offers, err := e.c.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
			TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge", InstanceCount: aws.Int32(1),
			DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(now.Add(time.Hour)), EndTimeBefore: aws.Time(now.Add(10 * 24 * time.Hour))})
		if err != nil || len(offers.TrainingPlanOfferings) == 0 {
			t.Fatalf("search: %v", err)
		}
		out, err := e.c.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name), Tags: tags,
			TrainingPlanOfferingId: offers.TrainingPlanOfferings[0].TrainingPlanOfferingId})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.TrainingPlanArn), nil
	case "cluster":
		out, err := e.c.CreateCluster(ctx, &sm.CreateClusterInput{ClusterName: aws.String(name), Tags: tags,
			InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"),
				InstanceType: "ml.g5.xlarge", InstanceCount: aws.Int32(1), ExecutionRole: aws.String(role),
				LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://b/p"), OnCreate: aws.String("on_create.sh")}}}})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.ClusterArn), nil
	}
	t.Fatalf("unknown kind %s", kind)
	return "", nil
}

func (e *tagsEnv) list(t *testing.T, arn string) []string {
	t.Helper()
	out, err := e.c.ListTags(context.Background(), &sm.ListTagsInput{ResourceArn: aws.String(arn)})
	if err != nil {
		t.Fatalf("ListTags %s: %v", arn, err)
	}
	if out.NextToken != nil {
		t.Fatalf("ListTags %s: NextToken %q for %d tags", arn, *out.NextToken, len(out.Tags))
	}
	return flat(out.Tags)
}

func wantList(t *testing.T, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tags = %q, want %q", got, want)
	}
}

// wantValidation checks err is a ValidationException whose message has
// every part.
func wantValidation(t *testing.T, err error, parts ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
		t.Fatalf("err = %v, want a ValidationException", err)
	}
	for _, p := range parts {
		if !strings.Contains(ae.ErrorMessage(), p) {
			t.Fatalf("message %q lacks %q", ae.ErrorMessage(), p)
		}
	}
}

// TestTagsRoundTrip: on every taggable kind, the create call's tags are
// listed; AddTags overwrites a key in place and appends a new one; DeleteTags
// removes the keys it names and ignores the ones the resource lacks.
func TestTagsRoundTrip(t *testing.T) {
	e := newTagsEnv(t)
	ctx := context.Background()
	for _, kind := range []string{"model", "endpoint-config", "endpoint", "training-plan", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			// Lengths are in characters: 128 two-byte letters make a key.
			wide := strings.Repeat("é", 128)
			arn, err := e.create(t, kind, "Tagged-"+strings.ReplaceAll(kind, "-", ""), tagList("Owner", "team-a", "cost center", "ml/42", wide, "ü"))
			if err != nil {
				t.Fatal(err)
			}
			wantList(t, e.list(t, arn), "Owner=team-a", "cost center=ml/42", wide+"=ü")
			if _, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{wide}}); err != nil {
				t.Fatal(err)
			}
			out, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("Stage", "prod", "Owner", "team-b")})
			if err != nil {
				t.Fatal(err)
			}
			wantList(t, flat(out.Tags), "Stage=prod", "Owner=team-b")
			wantList(t, e.list(t, arn), "Owner=team-b", "cost center=ml/42", "Stage=prod")
			if _, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"Owner", "Missing"}}); err != nil {
				t.Fatal(err)
			}
			wantList(t, e.list(t, arn), "cost center=ml/42", "Stage=prod")
			if _, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"cost center", "Stage"}}); err != nil {
				t.Fatal(err)
			}
			wantList(t, e.list(t, arn)) // every tag deleted: the create-time ones do not come back
			// An ARN with the name in capitals names the same resource.
			if kind != "cluster" {
				upper := arn[:strings.LastIndex(arn, "/")+1] + strings.ToUpper(arn[strings.LastIndex(arn, "/")+1:])
				if _, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(upper), Tags: tagList("k", "v")}); err != nil {
					t.Fatal(err)
				}
				wantList(t, e.list(t, arn), "k=v")
			}
		})
	}
}

// TestTagsGoWithTheResource: deleting a resource deletes its tags (the
// stored set too), and one created again under the same name, at the same
// instant, has only its own create-time tags.
func TestTagsGoWithTheResource(t *testing.T) {
	e := newTagsEnv(t)
	ctx := context.Background()
	stored := func(id string) bool {
		var ok bool
		_ = e.st.View(func(tx *store.Tx) error { ok = tx.Exists(tagging.KindTags, id); return nil })
		return ok
	}
	gone := func(arn string) {
		t.Helper()
		_, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn)})
		wantValidation(t, err, "Resource "+arn+" does not exist.")
		_, err = e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("k", "v")})
		wantValidation(t, err, "does not exist")
		_, err = e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"k"}})
		wantValidation(t, err, "does not exist")
	}

	t.Run("model", func(t *testing.T) {
		arn, err := e.create(t, "model", "m1", tagList("old", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("added", "2")}); err != nil {
			t.Fatal(err)
		}
		if !stored(endpoint.KindModel + "/m1") {
			t.Fatal("AddTags stored no tag set")
		}
		if _, err := e.c.DeleteModel(ctx, &sm.DeleteModelInput{ModelName: aws.String("m1")}); err != nil {
			t.Fatal(err)
		}
		if stored(endpoint.KindModel + "/m1") {
			t.Fatal("the tag set outlived its model")
		}
		gone(arn)
		again, err := e.create(t, "model", "m1", tagList("new", "3"))
		if err != nil || again != arn {
			t.Fatalf("recreate: %s %v", again, err)
		}
		wantList(t, e.list(t, arn), "new=3")
	})

	t.Run("endpoint", func(t *testing.T) {
		arn, err := e.create(t, "endpoint", "ep1", tagList("old", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("added", "2")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String("ep1")}); err != nil {
			t.Fatal(err)
		}
		// Deleting, the endpoint still has its tags.
		wantList(t, e.list(t, arn), "old=1", "added=2")
		for i := 0; i < 20 && stored(endpoint.KindEndpoint+"/ep1"); i++ {
			_ = e.ctrl.Reconcile(ctx, "ep1")
			e.clk.Step(time.Second)
		}
		if stored(endpoint.KindEndpoint + "/ep1") {
			t.Fatal("the tag set outlived its endpoint")
		}
		gone(arn)
		if _, err := e.create(t, "endpoint", "ep1", nil); err != nil {
			t.Fatal(err)
		}
		wantList(t, e.list(t, arn))
	})

	t.Run("cluster", func(t *testing.T) {
		arn, err := e.create(t, "cluster", "hp1", tagList("old", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("added", "2")}); err != nil {
			t.Fatal(err)
		}
		// A cluster is deleted once it is InService.
		e.clk.Step(time.Minute)
		if err := e.hp.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.DeleteCluster(ctx, &sm.DeleteClusterInput{ClusterName: aws.String("hp1")}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20 && stored(hyperpod.KindCluster+"/hp1"); i++ {
			e.clk.Step(time.Minute)
			if err := e.hp.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if stored(hyperpod.KindCluster + "/hp1") {
			t.Fatal("the tag set outlived its cluster")
		}
		gone(arn)
		again, err := e.create(t, "cluster", "hp1", tagList("new", "3"))
		if err != nil {
			t.Fatal(err)
		}
		wantList(t, e.list(t, again), "new=3")
	})
}

// TestTagsBadInput: each bad request is a ValidationException naming the
// member, and stores nothing: a refused create creates nothing, a refused
// AddTags or DeleteTags leaves the tags as they were.
func TestTagsBadInput(t *testing.T) {
	e := newTagsEnv(t)
	ctx := context.Background()
	arn, err := e.create(t, "endpoint-config", "cfg", tagList("keep", "me"))
	if err != nil {
		t.Fatal(err)
	}
	many := func(n int) []smtypes.Tag {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf("k%02d", i), "v")
		}
		return tagList(kv...)
	}
	long := strings.Repeat("k", 129)
	other := "arn:aws:sagemaker:eu-west-1:123456789012:model/nope"
	tests := []struct {
		name string
		call func() error
		want []string
	}{
		{"key over 128", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("ok", "1", long, "v")})
			return err
		}, []string{"Value '" + long + "' at 'tags.2.member.key' failed to satisfy constraint: Member must have length between 1 and 128"}},
		{"value over 256", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("k", strings.Repeat("v", 257))})
			return err
		}, []string{"at 'tags.1.member.value'", "less than or equal to 256"}},
		{"51 tags", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: many(51)})
			return err
		}, []string{"Value '[51 items]' at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"}},
		{"aws: prefix", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("AWS:owner", "x")})
			return err
		}, []string{"Value 'AWS:owner' at 'tags.1.member.key'", "must not start with 'aws:'"}},
		{"pattern", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("a#b", "x")})
			return err
		}, []string{"Value 'a#b' at 'tags.1.member.key'", `regular expression pattern: ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`}},
		{"duplicate key", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList("d", "1", "d", "2")})
			return err
		}, []string{"Value 'd' at 'tags.2.member.key'", "unique"}},
		{"routing strategy tag", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn), Tags: tagList(endpoint.StrategyTag, "random")})
			return err
		}, []string{"at 'tags.1.member.key'", "Create a new endpoint configuration"}},
		{"unknown ARN", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(other), Tags: tagList("k", "v")})
			return err
		}, []string{"Resource " + other + " does not exist."}},
		{"other account", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(strings.Replace(arn, "123456789012", "210987654321", 1)), Tags: tagList("k", "v")})
			return err
		}, []string{"does not exist"}},
		{"unknown type", func() error {
			_, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String("arn:aws:sagemaker:eu-west-1:123456789012:notebook-instance/nb")})
			return err
		}, []string{"does not exist", `no resources of type "notebook-instance"`}},
		{"ARN pattern", func() error {
			_, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String("cfg"), Tags: tagList("k", "v")})
			return err
		}, []string{"Value 'cfg' at 'resourceArn' failed to satisfy constraint: Member must satisfy regular expression pattern"}},
		{"ARN length", func() error {
			_, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn + strings.Repeat("x", 256))})
			return err
		}, []string{"at 'resourceArn'", "less than or equal to 256"}},
		{"no tag keys", func() error {
			_, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{}})
			return err
		}, []string{"at 'tagKeys'", "greater than or equal to 1"}},
		{"tag key to delete over 128", func() error {
			_, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"keep", long}})
			return err
		}, []string{"at 'tagKeys.2.member'", "between 1 and 128"}},
		{"delete routing strategy tag", func() error {
			_, err := e.c.DeleteTags(ctx, &sm.DeleteTagsInput{ResourceArn: aws.String(arn), TagKeys: []string{"keep", endpoint.StrategyTag}})
			return err
		}, []string{"at 'tagKeys.2.member'"}},
		{"MaxResults under 50", func() error {
			_, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn), MaxResults: aws.Int32(49)})
			return err
		}, []string{"Value '49' at 'maxResults' failed to satisfy constraint: Member must have value greater than or equal to 50"}},
		{"NextToken", func() error {
			_, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn), NextToken: aws.String("garbage")})
			return err
		}, []string{"Invalid pagination token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantValidation(t, tt.call(), tt.want...)
			wantList(t, e.list(t, arn), "keep=me")
		})
	}

	// Refused creates create nothing.
	creates := []struct {
		kind string
		tags []smtypes.Tag
		want string
	}{
		{"model", many(51), "Value '[51 items]' at 'tags'"},
		{"model", tagList(long, "v"), "at 'tags.1.member.key'"},
		{"endpoint-config", tagList("aws:x", "v"), "Value 'aws:x' at 'tags.1.member.key'"},
		{"endpoint", many(51), "Value '[51 items]' at 'tags'"},
		{"training-plan", tagList("k", strings.Repeat("v", 257)), "at 'tags.1.member.value'"},
		{"cluster", tagList(long, "v"), "at 'tags.1.member.key'"},
	}
	for i, c := range creates {
		t.Run("create "+c.kind, func(t *testing.T) {
			name := fmt.Sprintf("refused%d", i)
			_, err := e.create(t, c.kind, name, c.tags)
			wantValidation(t, err, c.want)
			var n int
			_ = e.st.View(func(tx *store.Tx) error {
				for _, b := range []string{endpoint.KindModel, endpoint.KindConfig, endpoint.KindEndpoint, capacity.KindPlans, hyperpod.KindCluster} {
					if tx.Exists(b, name) || tx.Exists(b, strings.ToLower(name)) {
						n++
					}
				}
				return nil
			})
			if n != 0 {
				t.Fatalf("a refused create of %s stored it", c.kind)
			}
		})
	}

	// The limit counts the tags a resource has: 49 + 2 new is refused, 49 +
	// 1 new + 1 overwritten is 50 and accepted.
	t.Run("limit after merge", func(t *testing.T) {
		full, err := e.create(t, "model", "full", many(49))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(full), Tags: tagList("x", "1", "y", "2")})
		wantValidation(t, err, "at 'tags'", "has 49 tags and this request adds 2 new keys", "at most 50 tags")
		if got := e.list(t, full); len(got) != 49 || slices.Contains(got, "x=1") {
			t.Fatalf("a refused AddTags changed the tags: %q", got)
		}
		if _, err := e.c.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(full), Tags: tagList("x", "1", "k00", "new")}); err != nil {
			t.Fatal(err)
		}
		got := e.list(t, full)
		if len(got) != 50 || got[0] != "k00=new" || got[49] != "x=1" {
			t.Fatalf("tags after filling up: %q", got)
		}
	})
}

// TestListTagsPages: a page holds at least 50 tags, so a resource's (at
// most 50) fit one page: MaxResults 50 or 100 and the SDK's paginator get
// them all with no NextToken. A token for a later offset (as the server
// would issue for a shorter page) starts there.
func TestListTagsPages(t *testing.T) {
	e := newTagsEnv(t)
	ctx := context.Background()
	var kv []string
	for i := range 50 {
		kv = append(kv, fmt.Sprintf("k%02d", i), fmt.Sprint(i))
	}
	arn, err := e.create(t, "model", "paged", tagList(kv...))
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []*int32{nil, aws.Int32(50), aws.Int32(100), aws.Int32(1000)} {
		out, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn), MaxResults: max})
		if err != nil || len(out.Tags) != 50 || out.NextToken != nil || aws.ToString(out.Tags[49].Key) != "k49" {
			t.Fatalf("MaxResults %v: %d tags, NextToken %v, err %v", max, len(out.Tags), out.NextToken, err)
		}
	}
	p := sm.NewListTagsPaginator(e.c, &sm.ListTagsInput{ResourceArn: aws.String(arn)})
	var all []smtypes.Tag
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out.Tags...)
	}
	if len(all) != 50 {
		t.Fatalf("paginator: %d tags", len(all))
	}
	// The offset token awsjson.Paging issues, for offset 30.
	out, err := e.c.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn), NextToken: aws.String("eyJvIjozMH0")})
	if err != nil || len(out.Tags) != 20 || aws.ToString(out.Tags[0].Key) != "k30" || out.NextToken != nil {
		t.Fatalf("from offset 30: %v %v", flat(out.Tags), err)
	}
}

// TestTagsDisabled: without a tag service the operations are refused, not
// silently ignored.
func TestTagsDisabled(t *testing.T) {
	srv, _ := newAPI(t)
	st, _, raw := call(t, srv.URL, "ListTags", `{"ResourceArn":"arn:aws:sagemaker:eu-west-1:123456789012:model/m"}`)
	if st != 400 || !strings.Contains(string(raw), "Tags are not enabled") {
		t.Fatalf("%d %s", st, raw)
	}
}
