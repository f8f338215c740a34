package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	role               *rbacv1.Role
	roleBinding        *rbacv1.RoleBinding
	budget             *policyv1.PodDisruptionBudget
	service            *corev1.Service
	// serviceMonitor is prometheus-operator's, which client-go's scheme
	// does not know: kept unstructured (and out of objects).
	serviceMonitor *unstructured.Unstructured
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
			var head metav1.TypeMeta
			if err := yaml.Unmarshal(json, &head); err != nil {
				t.Fatalf("%s: %v", m.Template, err)
			}
			if head.APIVersion == "monitoring.coreos.com/v1" && head.Kind == "ServiceMonitor" {
				out.serviceMonitor = &unstructured.Unstructured{}
				if err := out.serviceMonitor.UnmarshalJSON(json); err != nil {
					t.Fatalf("%s: %v", m.Template, err)
				}
				continue
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
			case *rbacv1.Role:
				out.role = o
			case *rbacv1.RoleBinding:
				out.roleBinding = o
			case *policyv1.PodDisruptionBudget:
				out.budget = o
			case *corev1.Service:
				out.service = o
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
	if r.deployment == nil || r.serviceAccount == nil || r.clusterRole == nil || r.clusterRoleBinding == nil || r.budget == nil || r.service == nil {
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
		// The worker's default, spelt out so the probes and the Service
		// cannot drift from it.
		"MILLWRIGHT_METRICS_ADDRESS": ":8080",
		// Karpenter's client rates, not client-go's 5/10.
		"MILLWRIGHT_KUBE_QPS":                                 "200",
		"MILLWRIGHT_KUBE_BURST":                               "300",
		"MILLWRIGHT_GC_GRACE":                                 "5m",
		"MILLWRIGHT_REPAIR_TOLERATION":                        "30m",
		"MILLWRIGHT_CONSOLIDATION_SPLIT":                      "true",
		"MILLWRIGHT_CONSOLIDATION_THRESHOLD":                  "2",
		"MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION":           "0.3",
		"MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION":    "0.1",
		"MILLWRIGHT_CONSOLIDATION_SKIP_SETTLING_DESTINATIONS": "false",
		"MILLWRIGHT_NODECLASS_RESOLVE_INTERVAL":               "5m",
		// From the downward API (no literal value): checked in
		// TestRoleIsLeastPrivilegeInTheReleaseNamespace.
		"POD_NAMESPACE": "",
		"POD_NAME":      "",
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
	assertMetricsEndpoints(t, r, 8080)
	if r.serviceMonitor != nil {
		t.Error("a ServiceMonitor without serviceMonitor.enabled")
	}
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "millwright.dev/nodepool" || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("the worker may land on a node it manages: %+v", terms)
	}
}

// assertMetricsEndpoints: the container serves metrics and probes on the
// named port, the probes use it, and a ClusterIP Service named
// http-metrics reaches exactly the worker pods on it.
func assertMetricsEndpoints(t *testing.T, r rendered, port int32) {
	t.Helper()
	container := r.deployment.Spec.Template.Spec.Containers[0]
	if len(container.Ports) != 1 || container.Ports[0].Name != "metrics" || container.Ports[0].ContainerPort != port {
		t.Errorf("container ports %+v, want metrics:%d", container.Ports, port)
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": container.LivenessProbe, "/readyz": container.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("probe for %s: %+v", name, probe)
		}
	}
	if got := env(t, r.deployment)["MILLWRIGHT_METRICS_ADDRESS"].Value; got != fmt.Sprintf(":%d", port) {
		t.Errorf("MILLWRIGHT_METRICS_ADDRESS = %q, want :%d", got, port)
	}
	service := r.service
	if service.Spec.Type != corev1.ServiceTypeClusterIP || len(service.Spec.Ports) != 1 {
		t.Fatalf("metrics Service spec %+v", service.Spec)
	}
	servicePort := service.Spec.Ports[0]
	if servicePort.Name != "http-metrics" || servicePort.Port != port || servicePort.TargetPort.String() != "metrics" {
		t.Errorf("metrics Service port %+v, want http-metrics %d → metrics", servicePort, port)
	}
	if !maps.Equal(service.Spec.Selector, r.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("metrics Service selects %v, the worker pods are %v", service.Spec.Selector, r.deployment.Spec.Selector.MatchLabels)
	}
}

func TestRenderMetricsPortAndServiceMonitor(t *testing.T) {
	r := render(t, withValues(t, `
metrics: {port: 9102}
serviceMonitor:
  enabled: true
  additionalLabels: {release: kube-prometheus-stack}
  interval: 30s
`))
	assertMetricsEndpoints(t, r, 9102)
	sm := r.serviceMonitor
	if sm == nil {
		t.Fatal("no ServiceMonitor with serviceMonitor.enabled")
	}
	if sm.GetNamespace() != "millwright" || sm.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor %s/%s labels %v", sm.GetNamespace(), sm.GetName(), sm.GetLabels())
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if r.service.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has %v", k, v, r.service.Labels)
		}
	}
	if len(selector) == 0 {
		t.Error("ServiceMonitor selects every Service")
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v", endpoints)
	}
	endpoint := endpoints[0].(map[string]any)
	if endpoint["port"] != "http-metrics" || endpoint["path"] != "/metrics" || endpoint["interval"] != "30s" {
		t.Errorf("ServiceMonitor endpoint %v", endpoint)
	}
	if _, set := endpoint["scrapeTimeout"]; set {
		t.Errorf("scrapeTimeout set without serviceMonitor.scrapeTimeout: %v", endpoint)
	}
}

func TestRenderTemporalCloudMTLSAndIRSA(t *testing.T) {
	r := render(t, withValues(t, `
replicas: 3
clusterEndpoint: https://ABC.gr7.us-west-2.eks.amazonaws.com
interruptionQueue: Millwright-prod
logLevel: debug
aws: {pricing: true}
kubeClient: {qps: 50, burst: 75}
garbageCollection: {grace: 10m}
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
		"TEMPORAL_ADDRESS":                                    "prod.a1b2c.tmprl.cloud:7233",
		"TEMPORAL_NAMESPACE":                                  "prod.a1b2c",
		"MILLWRIGHT_TASK_QUEUE":                               "millwright-prod",
		"TEMPORAL_TLS_SERVER_NAME":                            "prod.a1b2c.tmprl.cloud",
		"TEMPORAL_TLS_CERT":                                   "/etc/millwright/temporal-tls/tls.crt",
		"TEMPORAL_TLS_KEY":                                    "/etc/millwright/temporal-tls/tls.key",
		"TEMPORAL_TLS_CA":                                     "/etc/millwright/temporal-tls/ca.crt",
		"MILLWRIGHT_CLUSTER_NAME":                             "prod",
		"MILLWRIGHT_CLUSTER_ENDPOINT":                         "https://ABC.gr7.us-west-2.eks.amazonaws.com",
		"AWS_REGION":                                          "us-west-2",
		"MILLWRIGHT_PRICING":                                  "true",
		"MILLWRIGHT_INTERRUPTION_QUEUE":                       "Millwright-prod",
		"MILLWRIGHT_LOG_LEVEL":                                "debug",
		"MILLWRIGHT_METRICS_ADDRESS":                          ":8080",
		"MILLWRIGHT_KUBE_QPS":                                 "50",
		"MILLWRIGHT_KUBE_BURST":                               "75",
		"MILLWRIGHT_GC_GRACE":                                 "10m",
		"MILLWRIGHT_REPAIR_TOLERATION":                        "30m",
		"MILLWRIGHT_CONSOLIDATION_SPLIT":                      "true",
		"MILLWRIGHT_CONSOLIDATION_THRESHOLD":                  "2",
		"MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION":           "0.3",
		"MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION":    "0.1",
		"MILLWRIGHT_CONSOLIDATION_SKIP_SETTLING_DESTINATIONS": "false",
		"MILLWRIGHT_NODECLASS_RESOLVE_INTERVAL":               "5m",
		"POD_NAMESPACE":                                       "", // the downward API's
		"POD_NAME":                                            "",
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
//   - pods/status patch: a new node's pods nominated to it at
//     registration (activities/kube RegisterNode).
//   - nodes get/list/watch/patch/delete: informers, registration and
//     disruption checks, taints and labels, removal (activities/kube).
//   - events create/patch: the event recorder (worker/run, worker/watch)
//     and drain's events (activities/kube).
//   - daemonsets list/watch: per-node overhead (activities/planning).
//   - poddisruptionbudgets list/watch: disruption candidates
//     (activities/planning ComputeCommands).
//   - namespaces, persistentvolumeclaims, persistentvolumes and
//     storageclasses list/watch: namespaceSelector labels and volume
//     topology (activities/planning).
//   - nodepools/ec2nodeclasses get/list/watch: the dynamic informers and
//     reads (worker/watch, activities/planning, activities/kube,
//     activities/millwright).
//   - nodepools/status and ec2nodeclasses/status patch: the status
//     controllers' merge patches (worker/status).
//   - nodeclaims get/list/watch/create/patch/delete and nodeclaims/status
//     patch: the NodeClaim mirror (activities/kube UpsertNodeClaim) and
//     its watcher (worker/watch).
var leastPrivilege = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces", "persistentvolumeclaims", "persistentvolumes"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"millwright.dev"}, Resources: []string{"nodepools", "ec2nodeclasses"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"millwright.dev"}, Resources: []string{"nodepools/status", "ec2nodeclasses/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"millwright.dev"}, Resources: []string{"nodeclaims"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	{APIGroups: []string{"millwright.dev"}, Resources: []string{"nodeclaims/status"}, Verbs: []string{"patch"}},
}

// namespacedLeastPrivilege is what the worker does in its own namespace
// only: get, create and update the per-NodePool Leases that serialise
// disruption decisions (activities/kube/disruptionlock.go).
var namespacedLeastPrivilege = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
}

func TestRoleIsLeastPrivilegeInTheReleaseNamespace(t *testing.T) {
	r := render(t, requiredValues())
	if r.role == nil || r.roleBinding == nil {
		t.Fatal("no Role/RoleBinding for the disruption Leases")
	}
	if r.role.Namespace != "millwright" || r.roleBinding.Namespace != "millwright" || r.roleBinding.RoleRef.Name != r.role.Name ||
		len(r.roleBinding.Subjects) != 1 || r.roleBinding.Subjects[0].Name != r.serviceAccount.Name {
		t.Errorf("Role %s/%s bound by %+v, want the release namespace and the chart's ServiceAccount", r.role.Namespace, r.role.Name, r.roleBinding)
	}
	if !reflect.DeepEqual(r.role.Rules, namespacedLeastPrivilege) {
		t.Errorf("Role rules = %+v, want %+v", r.role.Rules, namespacedLeastPrivilege)
	}
	var podNamespace *corev1.EnvVar
	for i, env := range r.deployment.Spec.Template.Spec.Containers[0].Env {
		if env.Name == "POD_NAMESPACE" {
			podNamespace = &r.deployment.Spec.Template.Spec.Containers[0].Env[i]
		}
	}
	if podNamespace == nil || podNamespace.ValueFrom == nil || podNamespace.ValueFrom.FieldRef == nil || podNamespace.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("the worker is not told its namespace through the downward API (POD_NAMESPACE): %+v", podNamespace)
	}
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
