package helm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/crds"
)

// requiredValues are the values without defaults.
func requiredValues() map[string]any {
	return map[string]any{
		"clusterName": "prod",
		"aws":         map[string]any{"region": "us-west-2"},
	}
}

// withValues merges YAML over requiredValues (the way --set/-f layer).
func withValues(t *testing.T, overlay string) map[string]any {
	t.Helper()
	values := requiredValues()
	var extra map[string]any
	if err := yaml.Unmarshal([]byte(overlay), &extra); err != nil {
		t.Fatalf("test values: %v", err)
	}
	deepMerge(values, extra)
	return values
}

func deepMerge(into, from map[string]any) {
	for k, v := range from {
		if sub, ok := v.(map[string]any); ok {
			if existing, ok := into[k].(map[string]any); ok {
				deepMerge(existing, sub)
				continue
			}
		}
		into[k] = v
	}
}

// rendered are the typed objects of one render.
type rendered struct {
	objects            []runtime.Object
	deployment         *appsv1.Deployment
	serviceAccount     *corev1.ServiceAccount
	clusterRole        *rbacv1.ClusterRole
	clusterRoleBinding *rbacv1.ClusterRoleBinding
	budget             *policyv1.PodDisruptionBudget
}

// render renders the chart and decodes every document with client-go's
// scheme in strict mode, so an unknown or misspelt field fails the test.
func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	manifests, err := Render(Release{Name: "millwright", Namespace: "millwright"}, values)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	// Strict: a field the typed object does not have is an error.
	decoder := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		serializerjson.SerializerOptions{Strict: true})
	var out rendered
	for _, m := range manifests {
		reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(m.YAML)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", m.Template, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(string(doc))) == "" {
				continue
			}
			json, err := yaml.YAMLToJSONStrict(doc)
			if err != nil {
				t.Fatalf("%s: %v\n%s", m.Template, err, doc)
			}
			obj, _, err := decoder.Decode(json, nil, nil)
			if err != nil {
				t.Fatalf("%s: decoding: %v\n%s", m.Template, err, doc)
			}
			out.objects = append(out.objects, obj)
			switch o := obj.(type) {
			case *appsv1.Deployment:
				out.deployment = o
			case *corev1.ServiceAccount:
				out.serviceAccount = o
			case *rbacv1.ClusterRole:
				out.clusterRole = o
			case *rbacv1.ClusterRoleBinding:
				out.clusterRoleBinding = o
			case *policyv1.PodDisruptionBudget:
				out.budget = o
			default:
				t.Errorf("%s: unexpected %T", m.Template, obj)
			}
		}
	}
	return out
}

func env(t *testing.T, d *appsv1.Deployment) map[string]corev1.EnvVar {
	t.Helper()
	out := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if _, dup := out[e.Name]; dup {
			t.Errorf("env %s set twice", e.Name)
		}
		out[e.Name] = e
	}
	return out
}

func TestRenderDefaults(t *testing.T) {
	r := render(t, requiredValues())
	if r.deployment == nil || r.serviceAccount == nil || r.clusterRole == nil || r.clusterRoleBinding == nil || r.budget == nil {
		t.Fatalf("missing objects; rendered %d", len(r.objects))
	}
	d := r.deployment
	if got := *d.Spec.Replicas; got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != r.serviceAccount.Name {
		t.Errorf("pod service account %q, chart's %q", pod.ServiceAccountName, r.serviceAccount.Name)
	}
	subject := r.clusterRoleBinding.Subjects[0]
	if subject.Name != r.serviceAccount.Name || subject.Namespace != "millwright" || r.clusterRoleBinding.RoleRef.Name != r.clusterRole.Name {
		t.Errorf("binding %+v / %+v does not tie the service account to the role", subject, r.clusterRoleBinding.RoleRef)
	}
	if _, ok := r.serviceAccount.Annotations["eks.amazonaws.com/role-arn"]; ok {
		t.Error("IRSA annotation without serviceAccount.roleArn")
	}
	container := pod.Containers[0]
	if container.Image != "ghcr.io/millwright/millwright:0.1.0" {
		t.Errorf("image %q, want the appVersion tag", container.Image)
	}
	if sc := container.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
	if !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod may run as root")
	}
	got := map[string]string{}
	for name, e := range env(t, d) {
		got[name] = e.Value
	}
	want := map[string]string{
		"TEMPORAL_ADDRESS":        "temporal-frontend.temporal.svc.cluster.local:7233",
		"TEMPORAL_NAMESPACE":      "default",
		"MILLWRIGHT_CLUSTER_NAME": "prod",
		"AWS_REGION":              "us-west-2",
		"MILLWRIGHT_LOG_LEVEL":    "info",
	}
	if !maps.Equal(got, want) {
		t.Errorf("env = %v, want %v", got, want)
	}
	if len(pod.Volumes) != 0 {
		t.Errorf("volumes without TLS: %v", pod.Volumes)
	}
	if r.budget.Spec.MaxUnavailable.IntValue() != 1 || !maps.Equal(r.budget.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PDB %+v does not cover the worker pods %v", r.budget.Spec, d.Spec.Selector.MatchLabels)
	}
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "millwright.dev/nodepool" || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("the worker may land on a node it manages: %+v", terms)
	}
}

func TestRenderTemporalCloudMTLSAndIRSA(t *testing.T) {
	r := render(t, withValues(t, `
replicas: 3
clusterEndpoint: https://ABC.gr7.us-west-2.eks.amazonaws.com
interruptionQueue: Millwright-prod
logLevel: debug
aws: {pricing: true}
temporal:
  address: prod.a1b2c.tmprl.cloud:7233
  namespace: prod.a1b2c
  taskQueue: millwright-prod
  tls: {secretName: temporal-client, ca: true, serverName: prod.a1b2c.tmprl.cloud}
serviceAccount:
  roleArn: arn:aws:iam::111122223333:role/MillwrightWorker-prod
  annotations: {team: platform}
extraArgs: ["--batch-idle-duration=2s"]
`))
	d := r.deployment
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	want := map[string]string{
		"TEMPORAL_ADDRESS":              "prod.a1b2c.tmprl.cloud:7233",
		"TEMPORAL_NAMESPACE":            "prod.a1b2c",
		"MILLWRIGHT_TASK_QUEUE":         "millwright-prod",
		"TEMPORAL_TLS_SERVER_NAME":      "prod.a1b2c.tmprl.cloud",
		"TEMPORAL_TLS_CERT":             "/etc/millwright/temporal-tls/tls.crt",
		"TEMPORAL_TLS_KEY":              "/etc/millwright/temporal-tls/tls.key",
		"TEMPORAL_TLS_CA":               "/etc/millwright/temporal-tls/ca.crt",
		"MILLWRIGHT_CLUSTER_NAME":       "prod",
		"MILLWRIGHT_CLUSTER_ENDPOINT":   "https://ABC.gr7.us-west-2.eks.amazonaws.com",
		"AWS_REGION":                    "us-west-2",
		"MILLWRIGHT_PRICING":            "true",
		"MILLWRIGHT_INTERRUPTION_QUEUE": "Millwright-prod",
		"MILLWRIGHT_LOG_LEVEL":          "debug",
	}
	got := map[string]string{}
	for name, e := range env(t, d) {
		got[name] = e.Value
	}
	if !maps.Equal(got, want) {
		t.Errorf("env = %v\nwant %v", got, want)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "temporal-client" {
		t.Errorf("volumes = %+v, want the temporal-client secret", pod.Volumes)
	}
	mounts := pod.Containers[0].VolumeMounts
	if len(mounts) != 1 || mounts[0].MountPath != "/etc/millwright/temporal-tls" || !mounts[0].ReadOnly {
		t.Errorf("mounts = %+v", mounts)
	}
	if args := pod.Containers[0].Args; !slices.Equal(args, []string{"--batch-idle-duration=2s"}) {
		t.Errorf("args = %v", args)
	}
	annotations := r.serviceAccount.Annotations
	if annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/MillwrightWorker-prod" || annotations["team"] != "platform" {
		t.Errorf("service account annotations = %v", annotations)
	}
}

func TestRenderTemporalCloudAPIKey(t *testing.T) {
	r := render(t, withValues(t, `
temporal:
  address: us-west-2.aws.api.temporal.io:7233
  namespace: prod.a1b2c
  apiKey: {secretName: temporal-api-key}
`))
	e := env(t, r.deployment)
	ref := e["TEMPORAL_API_KEY"].ValueFrom
	if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "temporal-api-key" || ref.SecretKeyRef.Key != "api-key" {
		t.Fatalf("TEMPORAL_API_KEY = %+v, want the secret's api-key", e["TEMPORAL_API_KEY"])
	}
	if _, ok := e["TEMPORAL_TLS_CERT"]; ok {
		t.Error("client certificate configured without temporal.tls.secretName")
	}
}

func TestRenderExistingServiceAccount(t *testing.T) {
	r := render(t, withValues(t, `serviceAccount: {create: false, name: millwright-irsa}`))
	if r.serviceAccount != nil {
		t.Error("service account rendered with serviceAccount.create=false")
	}
	if r.deployment.Spec.Template.Spec.ServiceAccountName != "millwright-irsa" || r.clusterRoleBinding.Subjects[0].Name != "millwright-irsa" {
		t.Error("the existing service account is not the one used and bound")
	}
}

func TestRenderRefusesMissingValues(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no cluster name", map[string]any{"aws": map[string]any{"region": "us-west-2"}}, "clusterName is required"},
		{"no region", map[string]any{"clusterName": "prod"}, "aws.region is required"},
		{"existing service account without a name", map[string]any{"clusterName": "prod", "aws": map[string]any{"region": "us-west-2"}, "serviceAccount": map[string]any{"create": false}}, "serviceAccount.name is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(Release{Name: "millwright", Namespace: "millwright"}, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// leastPrivilege is every API call the worker makes, by the code that makes
// it:
//   - pods list/watch: the pod informer (worker/watch) and cluster state
//     (activities/planning); pods delete: drain fallback (activities/kube).
//   - pods/eviction create: drain (activities/kube).
//   - nodes get/list/watch/patch/delete: informers, registration and
//     disruption checks, taints and labels, removal (activities/kube).
//   - events create/patch: the event recorder (worker/run, worker/watch)
//     and drain's events (activities/kube).
//   - daemonsets list/watch: per-node overhead (activities/planning).
//   - nodepools/ec2nodeclasses get/list/watch: the dynamic informers and
//     reads (worker/watch, activities/planning, activities/kube,
//     activities/millwright).
var leastPrivilege = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"millwright.dev"}, Resources: []string{"nodepools", "ec2nodeclasses"}, Verbs: []string{"get", "list", "watch"}},
}

func TestClusterRoleIsLeastPrivilege(t *testing.T) {
	r := render(t, requiredValues())
	rules := r.clusterRole.Rules
	if len(rules) != len(leastPrivilege) {
		t.Fatalf("ClusterRole has %d rules, want %d:\n%+v", len(rules), len(leastPrivilege), rules)
	}
	for i, want := range leastPrivilege {
		got := rules[i]
		if !slices.Equal(got.APIGroups, want.APIGroups) || !slices.Equal(got.Resources, want.Resources) ||
			!slices.Equal(got.Verbs, want.Verbs) || len(got.ResourceNames) != 0 || len(got.NonResourceURLs) != 0 {
			t.Errorf("rule %d = %+v, want %+v", i, got, want)
		}
		for _, verb := range got.Verbs {
			if verb == "*" || verb == "update" || verb == "deletecollection" {
				t.Errorf("rule %d grants %q", i, verb)
			}
		}
	}
}

func TestChartCRDsAreDeployCRDs(t *testing.T) {
	inChart, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	generated := crds.All()
	if !slices.Equal(slices.Sorted(maps.Keys(inChart)), slices.Sorted(maps.Keys(generated))) {
		t.Fatalf("chart crds/ = %v, deploy/crds = %v", slices.Sorted(maps.Keys(inChart)), slices.Sorted(maps.Keys(generated)))
	}
	for name, data := range generated {
		if !bytes.Equal(inChart[name], data) {
			t.Errorf("%s differs from deploy/crds: cp deploy/crds/*.yaml deploy/helm/millwright/crds/", name)
		}
	}
}
