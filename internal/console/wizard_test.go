package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/chromedp/chromedp"
)

// choose picks value in the select sel, as a user does (a change event).
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.SetValue(sel, value),
		js(fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event('change', {bubbles: true})) || true`, sel)),
	)
}

// TestClusterWizard: the Clusters page's "Create cluster" opens the
// wizard. Quick setup: a bad name is refused with the server's error next
// to the name field and nothing created; a good one shows the review
// (the group, its price, the add-ons), creates the cluster through
// CreateCluster and lands on its page, InService, with the node
// autoscaler and observability on. Custom setup: a bad count
// is refused next to that group's count; then three groups (a
// MIG-partitioned ml.p4d.24xlarge, a spot ml.g5.xlarge at 0 and an
// ml.p5.48xlarge group on a training plan at 0), tiered storage at 25 %
// and observability off show in the review and in DescribeCluster; on the
// cluster's page the add-ons say so and observability is turned back on.
func TestClusterWizard(t *testing.T) {
	s := startServer(t, "cluster: {launchTime: 2s}\n")
	ctx := newBrowser(t, 1280, 900)
	clusters := func() []string {
		out, err := s.SM.ListClusters(context.Background(), &sm.ListClustersInput{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range out.ClusterSummaries {
			names = append(names, aws.ToString(c.ClusterName))
		}
		return names
	}
	before := len(clusters())
	// A training plan for clusters, which a group of its type can draw on.
	now := serverNow(t, s)
	offers, err := s.SM.SearchTrainingPlanOfferings(context.Background(), &sm.SearchTrainingPlanOfferingsInput{
		TargetResources: []smtypes.SageMakerResourceName{"hyperpod-cluster"}, InstanceType: "ml.p5.48xlarge",
		InstanceCount: aws.Int32(1), DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(now),
		EndTimeBefore: aws.Time(now.Add(30 * 24 * time.Hour))})
	if err != nil || len(offers.TrainingPlanOfferings) == 0 {
		t.Fatalf("search: %+v %v", offers, err)
	}
	plan, err := s.SM.CreateTrainingPlan(context.Background(), &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("wizard-plan"),
		TrainingPlanOfferingId: offers.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatal(err)
	}
	planArn := aws.ToString(plan.TrainingPlanArn)

	run(t, ctx, "open the wizard from Clusters",
		chromedp.Navigate(s.URL+"/console/clusters"),
		chromedp.Click(chromedp.CSS(`[data-testid=new-cluster]`)),
		waitHeading("Create HyperPod cluster"),
		waitText(`[data-testid=quick-defaults]`, "ml.g5.8xlarge at 0 nodes"),
	)
	run(t, ctx, "quick setup with a bad name",
		typeInto(`#cw-name`, "bad_name"),
		chromedp.Click(chromedp.CSS(`[data-testid=to-review]`)),
		waitText(`[data-testid=review]`, "bad_name"),
		chromedp.Click(chromedp.CSS(`[data-testid=create-cluster]`)),
		waitText(`[data-testid=error-cw-name]`, "clusterName"),
	)
	if n := len(clusters()); n != before {
		t.Fatalf("a refused create left %d clusters, want %d", n, before)
	}
	run(t, ctx, "quick setup: review",
		typeInto(`#cw-name`, "quick-1"),
		chromedp.Click(chromedp.CSS(`[data-testid=to-review]`)),
		waitText(`[data-testid=review-groups]`, "ml.g5.8xlarge"),
		waitText(`[data-testid=review-groups]`, "on-demand"),
		waitText(`[data-testid=review-total]`, "/h"),
		waitText(`[data-testid=review-addons]`, "On · role"),
	)
	run(t, ctx, "quick setup: create",
		chromedp.Click(chromedp.CSS(`[data-testid=create-cluster]`)),
		waitHeading("quick-1"),
	)
	s.advanceClock(t, 3*time.Second, "")
	run(t, ctx, "the quick cluster InService with its add-ons",
		waitText(`[data-testid=cluster-status]`, "InService"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-karpenter][data-enabled=true]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-observability][data-enabled=true]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-tiered-storage][data-enabled=false]`)),
	)

	run(t, ctx, "custom setup",
		chromedp.Navigate(s.URL+"/console/clusters/new"),
		waitHeading("Create HyperPod cluster"),
		chromedp.Click(chromedp.CSS(`[data-testid=mode-custom]`)),
		typeInto(`#cw-name`, "custom-1"),
		chromedp.WaitReady(chromedp.CSS(`#cw-g0-type option[value="ml.p4d.24xlarge"]`)),
		choose(`#cw-g0-type`, "ml.p4d.24xlarge"),
		chromedp.WaitReady(chromedp.CSS(`#cw-g0-mig option[value="all-1g.5gb"]`)),
		choose(`#cw-g0-mig`, "all-1g.5gb"),
		typeInto(`#cw-g0-count`, "-1"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-group]`)),
		choose(`#cw-g1-type`, "ml.g5.xlarge"),
		choose(`#cw-g1-capacity`, "spot"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-group]`)),
		choose(`#cw-g2-type`, "ml.p5.48xlarge"),
		chromedp.WaitReady(chromedp.CSS(`#cw-g2-capacity option[value="`+planArn+`"]`)),
		choose(`#cw-g2-capacity`, planArn),
		chromedp.Click(chromedp.CSS(`[data-testid=addon-observability]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=addon-tiered-storage]`)),
		typeInto(`#cw-tiered-percent`, "25"),
		chromedp.Click(chromedp.CSS(`[data-testid=to-review]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=create-cluster]`)),
		waitText(`[data-testid=error-cw-g0-count]`, "instanceCount"),
	)
	if n := len(clusters()); n != before+1 {
		t.Fatalf("a refused create left %d clusters, want %d", n, before+1)
	}
	run(t, ctx, "custom setup: review",
		typeInto(`#cw-g0-count`, "1"),
		chromedp.Click(chromedp.CSS(`[data-testid=to-review]`)),
		waitText(`[data-testid=review-groups]`, "ml.p4d.24xlarge"),
		waitText(`[data-testid=review-groups]`, "all-1g.5gb"),
		waitText(`[data-testid=review-groups]`, "spot"),
		waitText(`[data-testid=review-groups]`, "training plan wizard-plan"),
		waitText(`[data-testid=review-groups]`, "prepaid (plan)"),
		waitText(`[data-testid=review-addons]`, "On · 25% of each node's memory"),
		waitText(`[data-testid=review-addons]`, "Off"),
	)
	screenshot(t, ctx, "cluster-wizard-review", true)
	run(t, ctx, "custom setup: create",
		chromedp.Click(chromedp.CSS(`[data-testid=create-cluster]`)),
		waitHeading("custom-1"),
	)
	s.advanceClock(t, 3*time.Second, "")
	run(t, ctx, "the custom cluster InService with its add-ons",
		waitText(`[data-testid=cluster-status]`, "InService"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-observability][data-enabled=false]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-tiered-storage][data-enabled=true]`)),
		waitText(`[data-testid=addon-tiered-storage]`, "25% of node memory"),
		waitText(`[data-testid=instance-groups]`, "all-1g.5gb"),
		waitText(`[data-testid=instance-groups]`, "spot"),
	)
	d, err := s.SM.DescribeCluster(context.Background(), &sm.DescribeClusterInput{ClusterName: aws.String("custom-1")})
	if err != nil {
		t.Fatal(err)
	}
	if ts := d.TieredStorageConfig; ts == nil || aws.ToInt32(ts.InstanceMemoryAllocationPercentage) != 25 ||
		d.AutoScaling == nil || d.AutoScaling.Mode != smtypes.ClusterAutoScalingModeEnable || len(d.InstanceGroups) != 3 ||
		aws.ToString(d.InstanceGroups[2].TrainingPlanArn) != planArn {
		t.Errorf("DescribeCluster custom-1: tiered %+v, autoscaling %+v, %d groups", d.TieredStorageConfig, d.AutoScaling, len(d.InstanceGroups))
	}
	run(t, ctx, "turn observability back on",
		chromedp.Click(chromedp.CSS(`[data-testid=toggle-observability]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=addon-observability][data-enabled=true]`)),
	)
	screenshot(t, ctx, "cluster-addons", true)
}
