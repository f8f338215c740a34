package e2e

// A Karpenter user's configurations: Karpenter's published example
// NodePools and EC2NodeClasses (deploy/examples/karpenter, in their
// Karpenter form) go through `starter migrate`, are applied with kubectl,
// and a pod selecting each pool runs on a new node of that pool — every
// AMI family (AL2023, AL2, Bottlerocket, Windows 2019/2022/2025, Custom),
// custom userData, pinned aliases, minValues, TTLs, limits, large types,
// several disks, instance-store NVMe. Each pod's node must meet its pool's
// requirements (Karpenter's keys read as Millwright's labels). One stack,
// all pools at once.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/activities/kube"
	"github.com/millwright/millwright/deploy/examples"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// examplePool is one migrated NodePool, renamed after its file.
type examplePool struct {
	file, pool, class string
	windows           bool
	// requirements are the pool's, under Millwright's label keys.
	requirements []corev1.NodeSelectorRequirement
}

func TestKarpenterExamplesRunPods(t *testing.T) {
	if suite == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	ctx := context.Background()
	namespace := "karpenter-examples"
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(examples.Karpenter, "karpenter/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pools, applied []examplePool
	var classes []string
	for _, file := range files {
		name := strings.TrimPrefix(file, "karpenter/")
		migrated, unsupported := migrateExample(t, file)
		docs, filePools, fileClasses := renameExample(t, name, migrated)
		kubectlApply(t, docs)
		classes = append(classes, fileClasses...)
		applied = append(applied, filePools...)
		if unsupported != "" {
			t.Logf("%s: starter migrate: %s", name, unsupported)
		}
		pools = append(pools, filePools...)
	}
	// Deferred, not t.Cleanup: the polls need the test's context, which is
	// cancelled before cleanups run.
	defer cleanUpExamples(t, namespace, applied, classes)

	created := time.Now()
	for _, p := range pools {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.pool, Namespace: namespace, Labels: map[string]string{"app": "karpenter-example"}},
			Spec: corev1.PodSpec{
				// Karpenter's key: Millwright honours it.
				NodeSelector: map[string]string{"karpenter.sh/nodepool": p.pool},
				Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{
					Name: "pause", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}},
			},
		}
		if p.windows {
			pod.Spec.NodeSelector[corev1.LabelOSStable] = "windows"
		}
		if _, err := suite.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pending := map[string]bool{}
	for _, p := range pools {
		pending[p.pool] = true
	}
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*launchTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := suite.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=karpenter-example"})
		if err != nil {
			return false, nil
		}
		for _, pod := range list.Items {
			if pod.Status.Phase != corev1.PodRunning || !pending[pod.Name] {
				continue
			}
			node, err := suite.kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			// The pods tolerate every taint, the unregistered one too, so
			// they may run before the node workflow registers the Node and
			// puts the launch's labels on it: wait for that.
			if _, registered := node.Annotations[kube.RegisteredAnnotation]; !registered {
				continue
			}
			delete(pending, pod.Name)
			p := poolNamed(pools, pod.Name)
			if node.Labels[apisv1.LabelNodePool] != p.pool {
				t.Errorf("pod %s runs on %s of pool %q", pod.Name, node.Name, node.Labels[apisv1.LabelNodePool])
			}
			wantOS := map[bool]string{true: "windows", false: "linux"}[p.windows]
			if !nodeMeets(node, p.requirements) {
				t.Errorf("pod %s's node %s (%s) does not meet its pool's requirements %v; labels %v",
					pod.Name, node.Name, node.Labels[corev1.LabelInstanceTypeStable], p.requirements, node.Labels)
			}
			if node.Labels[corev1.LabelOSStable] != wantOS {
				t.Errorf("pod %s's node %s has os %q, want %s", pod.Name, node.Name, node.Labels[corev1.LabelOSStable], wantOS)
			}
			t.Logf("%s: pod Running on %s (%s, %s) %s after creation", p.file, node.Name,
				node.Labels[corev1.LabelInstanceTypeStable], node.Status.NodeInfo.OSImage, time.Since(created).Round(time.Second))
		}
		return len(pending) == 0, nil
	})
	for pool := range pending {
		t.Errorf("pool %s (%s): its pod did not run within %s", pool, poolNamed(pools, pool).file, 2*launchTimeout)
	}
}

// migrateExample runs `starter migrate` on an example and returns its
// stdout, and the unsupported lines of its report.
func migrateExample(t *testing.T, file string) ([]byte, string) {
	t.Helper()
	manifest, err := fs.ReadFile(examples.Karpenter, file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(suite.starterBinary, "migrate", "-")
	cmd.Stdin = bytes.NewReader(manifest)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var unsupported []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "unsupported ") {
			unsupported = append(unsupported, line)
		}
	}
	if err != nil && len(unsupported) == 0 {
		t.Fatalf("starter migrate %s: %v\n%s", file, err, stderr.String())
	}
	return stdout.Bytes(), strings.Join(unsupported, "; ")
}

// renameExample gives the example's objects names of their own (the
// examples reuse "default"), puts the stack's cluster in, and returns the
// manifest with its pools and classes.
func renameExample(t *testing.T, file string, migrated []byte) ([]byte, []examplePool, []string) {
	t.Helper()
	stem := strings.TrimSuffix(file, ".yaml")
	text := strings.NewReplacer("${CLUSTER_NAME}", suite.stack.ClusterName(),
		"${CLUSTER_ENDPOINT}", suite.stack.Cluster.RESTConfig().Host).Replace(string(migrated))
	var out [][]byte
	var pools []examplePool
	var classes []string
	for _, doc := range strings.Split(text, "\n---\n") {
		var object map[string]any
		if err := yaml.Unmarshal([]byte(doc), &object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if object == nil {
			continue
		}
		metadata := object["metadata"].(map[string]any)
		name := exampleName(stem, metadata["name"])
		metadata["name"] = name
		switch object["kind"] {
		case "NodePool":
			spec := object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			ref := spec["nodeClassRef"].(map[string]any)
			ref["name"] = exampleName(stem, ref["name"])
			windows := strings.Contains(doc, "values: [\"windows\"]") || strings.Contains(doc, "- windows")
			pools = append(pools, examplePool{file: file, pool: name, class: ref["name"].(string), windows: windows,
				requirements: canonicalRequirements(t, spec["requirements"])})
		case "EC2NodeClass":
			classes = append(classes, name)
		}
		encoded, err := yaml.Marshal(object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, encoded)
	}
	return bytes.Join(out, []byte("---\n")), pools, classes
}

// exampleName is an object's name prefixed with its file's, cut to 63
// characters.
func exampleName(stem string, name any) string {
	out := fmt.Sprintf("%s-%s", stem, name)
	if len(out) > 63 {
		out = out[:63]
	}
	return out
}

// canonicalRequirements decodes a pool's requirements (dropping minValues)
// with their keys as Millwright labels Nodes.
func canonicalRequirements(t *testing.T, raw any) []corev1.NodeSelectorRequirement {
	t.Helper()
	encoded, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []corev1.NodeSelectorRequirement
	if err := json.Unmarshal(encoded, &reqs); err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		reqs[i].Key = scheduling.CanonicalLabelKey(reqs[i].Key)
	}
	return reqs
}

// nodeMeets reports whether node's labels satisfy every requirement.
func nodeMeets(node *corev1.Node, reqs []corev1.NodeSelectorRequirement) bool {
	selector, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
	})
	return err == nil && selector.Match(node)
}

func poolNamed(pools []examplePool, name string) examplePool {
	for _, p := range pools {
		if p.pool == name {
			return p
		}
	}
	return examplePool{}
}

// cleanUpExamples deletes the pods, then the pools' Nodes (each drained and
// terminated by its node workflow), waits for their instances to be gone,
// then deletes the pools and classes.
func cleanUpExamples(t *testing.T, namespace string, pools []examplePool, classes []string) {
	ctx := context.Background()
	// Pods first, so no pending pod launches a node while the nodes go.
	now := int64(0)
	_ = suite.kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &now}, metav1.ListOptions{})
	poll(t, 2*time.Minute, "the example pods deleted", func(ctx context.Context) (bool, error) {
		list, err := suite.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	_ = suite.kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	isExample := map[string]bool{}
	for _, p := range pools {
		isExample[p.pool] = true
	}
	nodes, err := suite.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Error(err)
		return
	}
	for _, node := range nodes.Items {
		if isExample[node.Labels[apisv1.LabelNodePool]] {
			_ = suite.kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		}
	}
	poll(t, 5*time.Minute, "the example pools' instances terminated", func(context.Context) (bool, error) {
		for _, inst := range suite.stack.Emulator.State().LiveInstances() {
			if isExample[inst.Tags[apisv1.TagNodePool]] {
				return false, nil
			}
		}
		return true, nil
	})
	for _, p := range pools {
		_, _, _ = runKubectl(nil, "delete", "nodepool", p.pool, "--wait=false")
	}
	isClass := map[string]bool{}
	for _, c := range classes {
		isClass[c] = true
		_, _, _ = runKubectl(nil, "delete", "ec2nodeclass", c, "--wait=false")
	}
	// The instance profiles Millwright made for the classes' roles go with
	// them.
	poll(t, 2*time.Minute, "the example classes' instance profiles deleted", func(context.Context) (bool, error) {
		for _, profile := range suite.stack.Emulator.InstanceProfiles() {
			if isClass[profile.Tags[apisv1.TagNodeClass]] {
				return false, nil
			}
		}
		return true, nil
	})
}

// karpenterOnlyFields is a Karpenter NodePool and EC2NodeClass setting
// fields Millwright does not implement.
const karpenterOnlyFields = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: karpenter-only-fields
spec:
  replicas: 3
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: karpenter-only-fields}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: karpenter-only-fields
spec:
  role: KarpenterNodeRole-${CLUSTER_NAME}
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: "${CLUSTER_NAME}"}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: "${CLUSTER_NAME}"}}]
  amiSelectorTerms: [{alias: al2023@latest}]
  cpuOptions: {nestedVirtualization: enabled}
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs: {volumeSize: 20Gi}
`

// TestKarpenterOnlyFieldsRefused: Karpenter fields Millwright does not
// implement are listed by `starter migrate`, and the API server refuses the
// migrated objects naming each field and why, also with kubectl's field
// validation off (nothing is dropped as unknown).
func TestKarpenterOnlyFieldsRefused(t *testing.T) {
	if suite == nil {
		t.Skip("needs the local stack (not with -short)")
	}
	cmd := exec.Command(suite.starterBinary, "migrate", "-")
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(karpenterOnlyFields, "${CLUSTER_NAME}", suite.stack.ClusterName()))
	var migrated, report bytes.Buffer
	cmd.Stdout, cmd.Stderr = &migrated, &report
	_ = cmd.Run()
	for _, field := range []string{"spec.replicas", "spec.cpuOptions", "spec.blockDeviceMappings[0].rootVolume"} {
		if !strings.Contains(report.String(), field) {
			t.Errorf("starter migrate does not list %s:\n%s", field, report.String())
		}
	}
	for _, validate := range []string{"--validate=strict", "--validate=false"} {
		_, stderr, err := runKubectl(migrated.Bytes(), "apply", validate, "-f", "-")
		if err == nil {
			t.Errorf("kubectl apply %s of the Karpenter-only fields succeeded", validate)
		}
		for _, want := range []string{"spec.replicas", "replicas is not supported", "spec.cpuOptions", "cpuOptions is not supported",
			"spec.blockDeviceMappings[0].rootVolume", "rootVolume is not supported"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("kubectl apply %s: the error does not say %q:\n%s", validate, want, stderr)
			}
		}
		t.Logf("kubectl apply %s:\n%s", validate, strings.TrimSpace(stderr))
	}
	for _, kind := range []string{"nodepool", "ec2nodeclass"} {
		if out, _, _ := runKubectl(nil, "get", kind, "karpenter-only-fields", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("%s karpenter-only-fields exists after the refused apply", kind)
			_, _, _ = runKubectl(nil, "delete", kind, "karpenter-only-fields")
		}
	}
}
