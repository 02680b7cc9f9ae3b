package server

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/config"
)

// TestTagsWiredAndDurable: the server serves the tag operations on the
// ARNs its create and describe calls return (the default cluster's
// included), and the tags survive a restart.
func TestTagsWiredAndDurable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	h := startHarness(t, config.Config{DataDir: dir})
	ctx := context.Background()
	m, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String("m1"),
		Tags:             []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("search")}},
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.sm.DescribeCluster(ctx, &sm.DescribeClusterInput{ClusterName: aws.String("ml-cluster")})
	if err != nil {
		t.Fatal(err)
	}
	arns := []string{aws.ToString(m.ModelArn), aws.ToString(c.ClusterArn)}
	for _, arn := range arns {
		if _, err := h.sm.AddTags(ctx, &sm.AddTagsInput{ResourceArn: aws.String(arn),
			Tags: []smtypes.Tag{{Key: aws.String("stage"), Value: aws.String("prod")}}}); err != nil {
			t.Fatalf("AddTags %s: %v", arn, err)
		}
	}
	h.srv.Stop(ctx)

	h2 := startHarness(t, config.Config{DataDir: dir})
	want := map[string][]string{arns[0]: {"team=search", "stage=prod"}, arns[1]: {"stage=prod"}}
	for _, arn := range arns {
		out, err := h2.sm.ListTags(ctx, &sm.ListTagsInput{ResourceArn: aws.String(arn)})
		if err != nil {
			t.Fatalf("ListTags %s after restart: %v", arn, err)
		}
		var got []string
		for _, tg := range out.Tags {
			got = append(got, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
		}
		if !slices.Equal(got, want[arn]) {
			t.Fatalf("%s after restart: %q, want %q", arn, got, want[arn])
		}
	}
}
