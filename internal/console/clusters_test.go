package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/chromedp/chromedp"
)

// The Clusters, Deployments and Apply pages, driven in the browser against
// the real server; what they change is checked through the APIs.

const manifestsBase = "/apis/inference.sagemaker.aws.amazon.com/v1"

// demoYAML is the README's demo.yaml JumpStartModel with one replica kept
// running, so that the simulated engine serves it.
const demoYAML = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: demo}
spec:
  sageMakerEndpoint: {name: demo}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
  autoScalingSpec: {minReplicaCount: 1, maxReplicaCount: 4, cooldownPeriod: 60}
`

// paste replaces the text of the textarea sel as a paste does (one input
// event with the whole text).
func paste(t *testing.T, ctx context.Context, sel, text string) {
	t.Helper()
	js, _ := json.Marshal(text)
	jsSel, _ := json.Marshal(sel)
	ok := get(t, ctx, "paste into "+sel, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const t = document.querySelector(%s); t.focus(); t.select(); return document.execCommand('insertText', false, %s); })()`,
		jsSel, js)))
	if !ok {
		t.Fatalf("paste into %s: execCommand refused", sel)
	}
}

// doubleClick clicks the button sel twice in the same task, before the page
// can re-render it disabled: only the page's own guard stops the second.
func doubleClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(
			`(() => { const b = document.querySelector(%q); b.click(); b.click(); return true; })()`, sel))(ctx, tg)
		return err
	})
}

type objectList struct {
	Items []struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
	} `json:"items"`
}

// jsmNames lists the JumpStartModels of every namespace as namespace/name.
func jsmNames(t testing.TB, s *server) []string {
	t.Helper()
	var objs objectList
	if code := s.getJSON(t, manifestsBase+"/jumpstartmodels", &objs); code != http.StatusOK {
		t.Fatalf("list jumpstartmodels: %d", code)
	}
	var names []string
	for _, o := range objs.Items {
		names = append(names, o.Metadata.Namespace+"/"+o.Metadata.Name)
	}
	return names
}

type eventList struct {
	Items []struct{ Type, Reason, Message string } `json:"items"`
}

// checkPhoneWidth fails the test when the page, emulated at 390 px, is
// wider than that, naming the elements that stick out.
func checkPhoneWidth(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if w := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
		wide := get(t, ctx, "wide elements", chromedp.Evaluate[string](`[...document.querySelectorAll('main *')]
			.filter(e => e.getBoundingClientRect().right > 391)
			.slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ': ' + e.innerText.slice(0, 40)).join('\n')`))
		t.Errorf("at 390 px %s is %d px wide:\n%s", what, w, wide)
	}
}

// TestClusterPages: the default cluster is listed; its page shows its
// instance groups (with a MIG layout) and every node with its GPUs and MIG
// slices from the node API; it reads at a phone's width too. (A server of its
// own: it configures the cluster.)
func TestClusterPages(t *testing.T) {
	s := startServer(t, `cluster:
  instanceGroups:
    - {name: g5, instanceType: ml.g5.8xlarge, count: 2}
    - {name: p5-mig, instanceType: ml.p5.48xlarge, count: 1, migLayout: all-1g.10gb}
`)
	// One replica on a whole g5 GPU, one on a MIG slice of the p5.
	s.apply(t, demoYAML+`---
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: sliced}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.p5.48xlarge, acceleratorPartitionType: mig-1g.10gb}
`, "")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "the clusters list",
		chromedp.Navigate(s.URL+"/console/clusters"),
		waitText("main h1", "Clusters"),
		waitText(`[data-testid=clusters]`, "ml-cluster"),
		waitText(`[data-testid=clusters] tbody tr`, "InService"),
		waitText(`[data-testid=clusters] tbody tr`, "3/3"),
	)
	run(t, ctx, "open ml-cluster",
		chromedp.Click(chromedp.CSS(`[data-testid=clusters] a`)),
		waitText("main h1", "ml-cluster"),
		waitText(`[data-testid=cluster-props]`, "Automatic"),
		waitText(`[data-testid=instance-groups]`, "p5-mig"),
		waitText(`[data-testid=instance-groups]`, "all-1g.10gb"),
		waitText(`[data-testid=instance-groups]`, "on-demand"),
		waitText(`[data-testid=nodes]`, "1g.10gb: 1 used, 55 free"),
		waitText(`[data-testid=nodes]`, "jsm.default.sliced.r1.0"),
		waitText(`[data-testid=nodes]`, "0/8"),
		waitText(`[data-testid=nodes]`, "1/1"),
		waitText(`[data-testid=nodes]`, "jsm.default.demo.r1.0"),
	)
	nodes, err := s.SM.ListClusterNodes(context.Background(), &sm.ListClusterNodesInput{ClusterName: aws.String("ml-cluster")})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, ctx, `[data-testid=nodes] tbody tr`); got != len(nodes.ClusterNodeSummaries) || got != 3 {
		t.Fatalf("the nodes table has %d rows; ListClusterNodes has %d nodes, want 3", got, len(nodes.ClusterNodeSummaries))
	}
	for _, n := range nodes.ClusterNodeSummaries {
		run(t, ctx, "node "+*n.InstanceId, waitText(`[data-testid=nodes]`, *n.InstanceId))
	}
	// The shot shows the groups and the nodes.
	scrollToGroups(t, ctx)
	screenshot(t, ctx, "cluster-detail", true)

	// Ages follow the server's (dev) clock, not the browser's.
	s.advanceClock(t, 3*time.Hour, "")
	run(t, ctx, "ages by the server's clock", waitText(`[data-testid=nodes] tbody tr`, "3h 0m"))

	// At a phone's width the page does not scroll sideways.
	run(t, ctx, "phone width", chromedp.EmulateViewport(390, 844), chromedp.Sleep(200*time.Millisecond))
	checkPhoneWidth(t, ctx, "the cluster page")
}

// TestDeploymentLifecycle: a manifest pasted into Apply and applied with a
// double click is created once; the deployments list and its page show it
// running (state, replicas, placement, events); Delete asks first, then
// deletes it. (A server of its own: it checks that the whole list holds the
// one object, and then shows the empty list, and it needs one of the default
// cluster's two ml.g5.8xlarge nodes free.)
func TestDeploymentLifecycle(t *testing.T) {
	s := startServer(t, "")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open Apply",
		chromedp.Navigate(s.URL+"/console/apply"),
		waitText("main h1", "Apply a manifest"),
		chromedp.WaitVisible(chromedp.CSS(`#manifest`)),
	)
	paste(t, ctx, "#manifest", demoYAML)
	run(t, ctx, "apply with a double click",
		doubleClick(`[data-testid=apply]`),
		waitText(`[data-testid=apply-results]`, "created"),
		waitText(`[data-testid=apply-results]`, "default/demo"),
	)
	// Exactly one object, created once.
	var objs objectList
	s.getJSON(t, manifestsBase+"/jumpstartmodels", &objs)
	if len(objs.Items) != 1 || objs.Items[0].Metadata.Name != "demo" {
		t.Fatalf("after a double click: %+v, want the one object demo", objs.Items)
	}
	var evs eventList
	s.getJSON(t, manifestsBase+"/namespaces/default/jumpstartmodels/demo/events", &evs)
	created := 0
	for _, e := range evs.Items {
		if e.Reason == "Applied" {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("after a double click the events show %d applies, want 1: %+v", created, evs.Items)
	}

	run(t, ctx, "open the deployment from the result",
		chromedp.Click(chromedp.CSS(`[data-testid=apply-results] a`)),
		waitText("main h1", "demo"),
		waitText(`[data-testid=deployment-status]`, "DeploymentComplete"),
		waitText(`[data-testid=replicas]`, "1 ready of 1 desired"),
		waitText(`[data-testid=conditions]`, "Ready"),
		waitText(`[data-testid=placement]`, "hyperpod-i-"),
		waitText(`[data-testid=placement]`, "ml.g5.8xlarge"),
		waitText(`[data-testid=events]`, "Applied"),
		waitText(`[data-testid=events]`, "DeploymentComplete"),
		waitText(`[data-testid=kvcache]`, "GPU"),
		waitText(`[data-testid=spec]`, "deepseek-llm-r1-distill-qwen-1-5b"),
	)
	href := get(t, ctx, "endpoint link", chromedp.Evaluate[string](`document.querySelector('[data-testid=endpoint-link]').getAttribute('href')`))
	if href != "/console/endpoints/demo" {
		t.Fatalf("endpoint link %q, want /console/endpoints/demo", href)
	}
	screenshot(t, ctx, "deployment-detail", true)
	run(t, ctx, "phone width", chromedp.EmulateViewport(390, 844), chromedp.Sleep(200*time.Millisecond))
	checkPhoneWidth(t, ctx, "the deployment page")
	run(t, ctx, "back to desktop", chromedp.EmulateViewport(1280, 800))

	run(t, ctx, "the deployments list",
		chromedp.Navigate(s.URL+"/console/deployments"),
		waitText("main h1", "Deployments"),
		waitText(`[data-testid=deployments]`, "demo"),
		waitText(`[data-testid=deployments] tbody tr`, "JSM"),
		waitText(`[data-testid=deployments] tbody tr`, "1/1"),
		waitText(`[data-testid=deployments] tbody tr`, "DeploymentComplete"),
	)

	// Delete asks first; Cancel keeps the object.
	run(t, ctx, "delete, then cancel",
		chromedp.Click(chromedp.CSS(`[data-testid=deployments] tbody a`)),
		waitText("main h1", "demo"),
		chromedp.Click(chromedp.CSS(`[data-testid=delete]`)),
		waitText(`#delete-question`, "Delete JumpStartModel demo"),
		waitText(`:focus`, "Cancel"),
		chromedp.Click(chromedp.CSS(`.clusters-confirm button.secondary`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=delete]`)),
	)
	if code := s.getJSON(t, manifestsBase+"/namespaces/default/jumpstartmodels/demo", nil); code != http.StatusOK {
		t.Fatalf("after Cancel the object answers %d", code)
	}
	run(t, ctx, "delete, confirmed",
		chromedp.Click(chromedp.CSS(`[data-testid=delete]`)),
		doubleClick(`[data-testid=confirm-delete]`),
		waitText("main h1", "Deployments"),
	)
	deadline := time.Now().Add(30 * time.Second)
	for s.getJSON(t, manifestsBase+"/namespaces/default/jumpstartmodels/demo", nil) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("demo still exists 30 s after Delete")
		}
		time.Sleep(200 * time.Millisecond)
	}
	run(t, ctx, "the list empties", waitText("main", "No deployments yet"))
}

// TestApplyErrors: malformed YAML shows the server's message; a manifest
// with a bad field lists each cause with the field it names under the text;
// nothing is stored.
func TestApplyErrors(t *testing.T) {
	s := sharedServer(t)
	demo := name(t, "demo")
	yaml := strings.ReplaceAll(demoYAML, "name: demo}", "name: "+demo+"}")
	before := jsmNames(t, s)
	s.deleteWhenDone(t, manifestsBase+"/namespaces/default/jumpstartmodels/"+demo) // should a refused apply store it
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open Apply",
		chromedp.Navigate(s.URL+"/console/apply"),
		chromedp.WaitVisible(chromedp.CSS(`#manifest`)),
	)
	paste(t, ctx, "#manifest", "apiVersion: [oops\n")
	run(t, ctx, "malformed YAML",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-errors]`, "invalid YAML"),
		waitText(`[data-testid=apply-errors]`, "line 1"),
		waitText(`.field.invalid`, "Invalid"),
	)

	paste(t, ctx, "#manifest", strings.Replace(yaml, "maxReplicaCount: 4", "maxReplicaCount: -1", 1))
	run(t, ctx, "a bad field",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-errors] li code`, "spec.autoScalingSpec.maxReplicaCount"),
		waitText(`[data-testid=apply-errors]`, "must be >= 1, got -1"),
		waitText(`[data-testid=apply-errors]`, "JumpStartModel/"+demo),
	)
	if n := count(t, ctx, `[data-testid=apply-errors] li`); n != 2 {
		t.Fatalf("%d causes listed, want the server's 2", n)
	}

	paste(t, ctx, "#manifest", strings.Replace(yaml, "ml.g5.8xlarge", "ml.nope.1xlarge", 1))
	run(t, ctx, "an unknown instance type",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-errors] li code`, "spec.server.instanceType"),
		waitText(`[data-testid=apply-errors]`, `unknown instance type "ml.nope.1xlarge"`),
	)
	// The list is tied to the textarea for screen readers.
	if d := get(t, ctx, "aria-describedby", chromedp.Evaluate[string](`document.querySelector('#manifest').getAttribute('aria-describedby')`)); d != "apply-errors" {
		t.Fatalf("the textarea's aria-describedby is %q", d)
	}
	paste(t, ctx, "#manifest", strings.Replace(yaml, "maxReplicaCount: 4", "maxReplicaCount: -1", 1))
	run(t, ctx, "the bad field again, for the screenshot",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-errors] li code`, "spec.autoScalingSpec.maxReplicaCount"),
	)
	screenshot(t, ctx, "apply-errors", true)

	// A bad namespace is shown next to the namespace field.
	paste(t, ctx, "#manifest", yaml)
	run(t, ctx, "a bad namespace",
		chromedp.SendKeys(chromedp.CSS(`#namespace`), "Not_A_Label"),
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=error-namespace]`, "RFC 1123"),
	)

	if added := newNames(before, jsmNames(t, s)); len(added) != 0 {
		t.Fatalf("refused applies stored %v", added)
	}
}

// TestApplyNodePool: a body with Karpenter documents and a JumpStartModel
// is applied as `capstan apply` does, the node documents to the node API.
// (A server of its own: node pools are cluster-wide, and would change how
// every later test's replicas get nodes.)
func TestApplyNodePool(t *testing.T) {
	s := startServer(t, "")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open Apply",
		chromedp.Navigate(s.URL+"/console/apply"),
		chromedp.WaitVisible(chromedp.CSS(`#manifest`)),
	)
	paste(t, ctx, "#manifest", `# node pools first, then the model
apiVersion: karpenter.sagemaker.amazonaws.com/v1
kind: HyperpodNodeClass
metadata: {name: g5-groups}
spec:
  instanceGroups: [g5-8xlarge]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: inference}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: g5-groups}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
---
`+demoYAML)
	run(t, ctx, "apply",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-results]`, "HyperpodNodeClass g5-groups created"),
		waitText(`[data-testid=apply-results]`, "NodePool inference created"),
		waitText(`[data-testid=apply-results]`, "JumpStartModel default/demo created"),
	)
	var pools struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	s.getJSON(t, "/apis/karpenter.sh/v1/nodepools", &pools)
	if len(pools.Items) != 1 || pools.Items[0].Metadata.Name != "inference" {
		t.Fatalf("node pools %+v, want inference", pools.Items)
	}
	var objs objectList
	s.getJSON(t, manifestsBase+"/jumpstartmodels", &objs)
	if len(objs.Items) != 1 {
		t.Fatalf("jumpstartmodels %+v, want demo", objs.Items)
	}
	// A bad node document is refused with the node API's message.
	paste(t, ctx, "#manifest", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: broken}\nspec: {weight: -5}\n")
	run(t, ctx, "a bad node pool",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-errors]`, "weight"),
	)
}

// TestDeploymentPagesSignedIn: with credentials configured the pages sign
// their calls (SigV4 for SageMaker, the admin token for manifests and
// nodes), and a deployment that cannot be placed says why. (A server of its
// own: the shared one has no credentials.)
func TestDeploymentPagesSignedIn(t *testing.T) {
	const token = "console-admin-token-0123456789"
	s := startServer(t, "credentials: [{accessKeyId: AKIDCONSOLE, secretAccessKey: console-secret}]\nadminTokens: ["+token+"]\n")
	stuck := strings.NewReplacer("ml.g5.8xlarge", "ml.g6.12xlarge", "name: demo}", "name: stuck}").Replace(demoYAML)
	s.apply(t, stuck, token)
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "sign in",
		chromedp.Navigate(s.URL+"/console/deployments"),
		chromedp.WaitVisible(chromedp.CSS(`#accessKeyId`)),
		chromedp.SendKeys(chromedp.CSS(`#accessKeyId`), "AKIDCONSOLE"),
		chromedp.SendKeys(chromedp.CSS(`#secretAccessKey`), "console-secret"),
		chromedp.SendKeys(chromedp.CSS(`#adminToken`), token),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
		waitText("main h1", "Endpoints"),
	)
	run(t, ctx, "the pending deployment",
		chromedp.Click(chromedp.CSS(`header nav a[href="/console/deployments"]`)),
		waitText(`[data-testid=deployments] tbody tr`, "stuck"),
		waitText(`[data-testid=deployments] tbody tr`, "DeploymentPending"),
		waitText(`[data-testid=deployments] tbody tr`, "0/1"),
		chromedp.Click(chromedp.CSS(`[data-testid=deployments] tbody a`)),
		waitText(`[data-testid=pending]`, "no instance group of type ml.g6.12xlarge"),
		waitText(`main`, "No replica is placed on a node."),
	)
	run(t, ctx, "the cluster page through the node API",
		chromedp.Click(chromedp.CSS(`header nav a[href="/console/clusters"]`)),
		waitText(`[data-testid=clusters]`, "ml-cluster"),
		chromedp.Click(chromedp.CSS(`[data-testid=clusters] a`)),
		waitText(`[data-testid=nodes]`, "on-demand"),
	)
}

// TestMIGUnderKarpenter: the HyperPod guide's order, seen on the cluster
// page: with Karpenter turned on and a p5 group at zero nodes labelled
// all-1g.10gb, a JumpStartModel on a mig-1g.10gb slice gets a partitioned
// node launched for it, and the page shows the node with the replica on
// one of its slices. (A server of its own: it turns Karpenter on.)
func TestMIGUnderKarpenter(t *testing.T) {
	s := startServer(t, `cluster:
  launchTime: 2s
  instanceGroups:
    - {name: g5, instanceType: ml.g5.8xlarge, count: 1}
    - {name: p5-mig, instanceType: ml.p5.48xlarge, count: 0, migLayout: all-1g.10gb}
`)
	_, err := s.SM.UpdateCluster(context.Background(), &sm.UpdateClusterInput{ClusterName: aws.String("ml-cluster"),
		AutoScaling: &smtypes.ClusterAutoScalingConfig{Mode: smtypes.ClusterAutoScalingModeEnable, AutoScalerType: smtypes.ClusterAutoScalerTypeKarpenter},
		ClusterRole: aws.String("arn:aws:iam::000000000000:role/capstan")})
	if err != nil {
		t.Fatal(err)
	}
	s.apply(t, `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: sliced}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.p5.48xlarge, acceleratorPartitionType: mig-1g.10gb}
`, "")
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "the cluster with Karpenter on",
		chromedp.Navigate(s.URL+"/console/clusters"),
		waitText(`[data-testid=clusters]`, "ml-cluster"),
		chromedp.Click(chromedp.CSS(`[data-testid=clusters] a`)),
		waitText("main h1", "ml-cluster"),
		waitText(`[data-testid=instance-groups]`, "all-1g.10gb"),
	)
	run(t, ctx, "a partitioned node launched for the slice",
		waitText(`[data-testid=nodes]`, "ml.p5.48xlarge"),
		waitText(`[data-testid=nodes]`, "1g.10gb: 1 used, 55 free"),
		waitText(`[data-testid=nodes]`, "jsm.default.sliced.r1.0"),
	)
	scrollToGroups(t, ctx)
	screenshot(t, ctx, "mig-karpenter", true)
}

// scrollToGroups scrolls the cluster page to its instance groups, under
// the top bar, for a screenshot of the groups and the nodes.
func scrollToGroups(t *testing.T, ctx context.Context) {
	t.Helper()
	get(t, ctx, "scroll to the groups", chromedp.Evaluate[bool](
		`window.scrollTo(0, document.querySelector('[data-testid=instance-groups]').getBoundingClientRect().top + window.scrollY - 56); true`))
}
