package helm

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/local/awsemu"
	"github.com/millwright/millwright/local/stack"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// createAll creates every object with the given dry-run setting (nil: for real).
func createAll(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, crdManifests map[string][]byte, objects []runtime.Object, dryRun []string) {
	t.Helper()
	options := metav1.CreateOptions{DryRun: dryRun, FieldValidation: "Strict"}
	for name, manifest := range crdManifests {
		var obj map[string]any
		if err := yaml.Unmarshal(manifest, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := dyn.Resource(crdResource).Create(ctx, &unstructured.Unstructured{Object: obj}, options); err != nil {
			t.Fatalf("CRD %s (dry run %v): %v", name, dryRun, err)
		}
	}
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, options)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, options)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, options)
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, options)
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, options)
		case *policyv1.PodDisruptionBudget:
			_, err = client.PolicyV1().PodDisruptionBudgets(o.Namespace).Create(ctx, o, options)
		case *appsv1.Deployment:
			_, err = client.AppsV1().Deployments(o.Namespace).Create(ctx, o, options)
		case *corev1.Service:
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, o, options)
		default:
			t.Fatalf("no client for %T", obj)
		}
		if err != nil {
			t.Fatalf("%T (dry run %v): %v", obj, dryRun, err)
		}
	}
}

// TestChartOnTheLocalStack applies the rendered chart to the local stack's
// control plane (server-side dry run first, so the API server validates
// every object, then for real), then acts as the chart's ServiceAccount with
// a token the API server issued: every verb the worker needs is allowed,
// anything else is refused; and a whole worker running with only that token
// takes a node through its life (launch, registration, drain, termination).
func TestChartOnTheLocalStack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real control plane; not started under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	stateDir, err := os.MkdirTemp("", "millwright-helm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(stateDir)
	// Temporal without its UI, the control plane, the EC2/SQS emulator:
	// everything the worker needs, with nodes that boot in a second.
	started := time.Now()
	s, err := stack.Start(ctx, stack.Options{
		StateDir: stateDir, Ephemeral: true, ClusterName: "helm-chart",
		TemporalAddr: "127.0.0.1:0", DisableUI: true, EmulatorAddr: "127.0.0.1:0",
		Emulator: awsemu.Options{
			BootDelay: time.Second, ShutdownDelay: time.Second, NodeDeletionDelay: time.Second,
			NodeRegistrationRetry: time.Second,
		},
	})
	if err != nil {
		t.Fatalf("starting the local stack: %v", err)
	}
	defer func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("stopping the local stack: %v", err)
		}
	}()
	t.Logf("local stack ready in %s", time.Since(started).Round(time.Millisecond))
	c := s.Cluster
	admin := c.Clientset()
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	const namespace = "millwright"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := render(t, withValues(t, `serviceAccount: {roleArn: "arn:aws:iam::111122223333:role/MillwrightWorker-prod"}`))
	crdManifests, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	// The stack installed the CRDs already: dry-run them (the API server
	// validates them), create the chart's objects for real.
	createAll(ctx, t, admin, dyn, nil, r.objects, []string{metav1.DryRunAll})
	for name, manifest := range crdManifests {
		var obj map[string]any
		if err := yaml.Unmarshal(manifest, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		live, err := dyn.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion(live.GetResourceVersion())
		if _, err := dyn.Resource(crdResource).Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Fatalf("CRD %s (dry run): %v", name, err)
		}
	}
	createAll(ctx, t, admin, dyn, nil, r.objects, nil)

	token, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, r.serviceAccount.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the chart's ServiceAccount: %v", err)
	}
	asWorker := rest.AnonymousClientConfig(c.RESTConfig())
	asWorker.BearerToken = token.Status.Token
	worker, err := kubernetes.NewForConfig(asWorker)
	if err != nil {
		t.Fatal(err)
	}

	type access struct {
		verb, group, resource, subresource, namespace string
	}
	var needed []access
	for _, rule := range leastPrivilege {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				a := access{verb: verb, group: rule.APIGroups[0], resource: resource}
				// "pods/eviction", "nodepools/status": a subresource.
				a.resource, a.subresource, _ = strings.Cut(resource, "/")
				needed = append(needed, a)
			}
		}
	}
	for _, rule := range namespacedLeastPrivilege {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				needed = append(needed, access{verb: verb, group: rule.APIGroups[0], resource: resource, namespace: namespace})
			}
		}
	}
	refused := []access{
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
		{verb: "create", resource: "nodes"},
		{verb: "update", resource: "nodes"},
		{verb: "patch", resource: "nodes", subresource: "status"},
		{verb: "get", resource: "secrets", namespace: namespace},
		{verb: "list", resource: "configmaps"},
		{verb: "create", resource: "pods", namespace: "default"},
		{verb: "update", resource: "pods", namespace: "default"},
		{verb: "create", group: "policy", resource: "poddisruptionbudgets", namespace: "default"},
		{verb: "delete", group: "apps", resource: "daemonsets", namespace: "kube-system"},
		{verb: "create", group: "millwright.dev", resource: "nodepools"},
		// The specs are the user's: status is patched, and the metadata
		// (hash annotations, the NodePool finalizer), nothing else.
		{verb: "update", group: "millwright.dev", resource: "nodepools"},
		{verb: "delete", group: "millwright.dev", resource: "nodepools"},
		{verb: "delete", group: "millwright.dev", resource: "ec2nodeclasses"},
		{verb: "update", group: "millwright.dev", resource: "nodepools", subresource: "status"},
		{verb: "update", group: "millwright.dev", resource: "ec2nodeclasses", subresource: "status"},
		{verb: "update", group: "millwright.dev", resource: "nodeclaims"},
		{verb: "deletecollection", group: "millwright.dev", resource: "nodeclaims"},
		{verb: "delete", resource: "namespaces"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	}
	check := func(a access, want bool) {
		review, err := worker.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review %+v: %v", a, err)
		}
		if review.Status.Allowed != want {
			t.Errorf("ServiceAccount %s %s %s/%s (group %q): allowed=%v, want %v (%s)", r.serviceAccount.Name, a.verb, a.resource, a.subresource, a.group, review.Status.Allowed, want, review.Status.Reason)
		}
	}
	for _, a := range needed {
		check(a, true)
	}
	for _, a := range refused {
		check(a, false)
	}

	// And through real calls, not only reviews.
	if _, err := worker.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing nodes as the worker: %v", err)
	}
	if _, err := worker.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing pods as the worker: %v", err)
	}
	if _, err := dynamic.NewForConfigOrDie(asWorker).Resource(schema.GroupVersionResource{Group: "millwright.dev", Version: "v1", Resource: "nodepools"}).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing NodePools as the worker: %v", err)
	}
	_, err = worker.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets as the worker: error %v, want Forbidden", err)
	}
	_, err = worker.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating a node as the worker: error %v, want Forbidden", err)
	}
	fmt.Fprintf(os.Stderr, "helm chart: %d allowed and %d refused accesses checked as the chart's ServiceAccount\n", len(needed), len(refused))

	runLifecycleAsServiceAccount(ctx, t, s, asWorker, namespace)
}
