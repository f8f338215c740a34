package cloud

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// TestAliasResolvesEachFamily: every alias family, latest and pinned,
// resolves to the public AMIs of that family and release, newest current
// first, a pinned deprecated release included and marked.
func TestAliasResolvesEachFamily(t *testing.T) {
	cases := []struct {
		alias string
		// want maps arch/variant to the name prefix of the chosen AMI.
		want       map[string]string
		deprecated bool
	}{
		{"al2023@v20240625", map[string]string{
			"amd64/standard": "amazon-eks-node-al2023-x86_64-standard-1.37-v20240625",
			"arm64/standard": "amazon-eks-node-al2023-arm64-standard-1.37-v20240625",
			"amd64/nvidia":   "amazon-eks-node-al2023-x86_64-nvidia-1.37-v20240625",
			"amd64/neuron":   "amazon-eks-node-al2023-x86_64-neuron-1.37-v20240625",
		}, true},
		{"al2@latest", map[string]string{
			"amd64/standard": "amazon-eks-node-1.37-v20261101",
			"arm64/standard": "amazon-eks-arm64-node-1.37-v20261101",
			"amd64/nvidia":   "amazon-eks-gpu-node-1.37-v20261101",
		}, false},
		{"bottlerocket@latest", map[string]string{
			"amd64/standard": "bottlerocket-aws-k8s-1.37-x86_64-v1.50.0-",
			"arm64/standard": "bottlerocket-aws-k8s-1.37-arm64-v1.50.0-",
			"amd64/nvidia":   "bottlerocket-aws-k8s-1.37-nvidia-x86_64-v1.50.0-",
			"arm64/nvidia":   "bottlerocket-aws-k8s-1.37-nvidia-arm64-v1.50.0-",
		}, false},
		{"bottlerocket@v1.20.3", map[string]string{
			"amd64/standard": "bottlerocket-aws-k8s-1.37-x86_64-v1.20.3-",
			"arm64/standard": "bottlerocket-aws-k8s-1.37-arm64-v1.20.3-",
			"amd64/nvidia":   "bottlerocket-aws-k8s-1.37-nvidia-x86_64-v1.20.3-",
			"arm64/nvidia":   "bottlerocket-aws-k8s-1.37-nvidia-arm64-v1.20.3-",
		}, true},
		{"windows2019@latest", map[string]string{"amd64/standard": "Windows_Server-2019-English-Core-EKS_Optimized-1.37-2026.11.12"}, false},
		{"windows2022@latest", map[string]string{"amd64/standard": "Windows_Server-2022-English-Core-EKS_Optimized-1.37-2026.11.12"}, false},
		{"windows2025@latest", map[string]string{"amd64/standard": "Windows_Server-2025-English-Core-EKS_Optimized-1.37-2026.11.12"}, false},
		{"windows2022@v20261014", map[string]string{"amd64/standard": "Windows_Server-2022-English-Core-EKS_Optimized-1.37-2026.10.14"}, false},
		{"windows2019@v20240613", map[string]string{"amd64/standard": "Windows_Server-2019-English-Core-EKS_Optimized-1.37-2024.06.13"}, true},
	}
	f := newFixture(t, func(c *fixtureConfig) { c.options.Cluster.KubernetesVersion = "1.37" })
	for _, tc := range cases {
		t.Run(tc.alias, func(t *testing.T) {
			resolved, err := f.provider.NodeClasses.Resolve(context.Background(), testNodeClass(func(nc *apisv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: tc.alias}}
			}))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, im := range resolved.Images {
				got[im.Arch+"/"+im.Variant] = im.Name
				if im.Deprecated != tc.deprecated {
					t.Errorf("%s deprecated = %v, want %v", im.Name, im.Deprecated, tc.deprecated)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("images %v, want %v", got, tc.want)
			}
			for kind, prefix := range tc.want {
				if !strings.HasPrefix(got[kind], prefix) {
					t.Errorf("%s: %q, want %s…", kind, got[kind], prefix)
				}
			}
		})
	}
}

// TestLaunchEachFamilyRegistersItsNode: a launch with each family's
// userData boots a node the emulator registers from that format (nodeadm,
// bootstrap.sh, Bottlerocket TOML, the Windows bootstrap) with the request's
// labels and taints, the class's kubelet maxPods and the family's OS; the
// class's own userData is merged in, not lost.
func TestLaunchEachFamilyRegistersItsNode(t *testing.T) {
	cases := []struct {
		alias, userData, wantOS string
		wantInUserData          []string
	}{
		{alias: "al2023@latest", wantOS: "linux",
			userData:       "#!/bin/bash\necho custom-al2023\n",
			wantInUserData: []string{"echo custom-al2023", "kind: NodeConfig", "strategy: RAID0"}},
		{alias: "al2@latest", wantOS: "linux",
			userData:       "#!/bin/bash\necho custom-al2\n",
			wantInUserData: []string{"echo custom-al2", "/etc/eks/bootstrap.sh 'c1'", "--local-disks raid0", "--max-pods=58"}},
		{alias: "bottlerocket@latest", wantOS: "linux",
			userData:       "[settings.host-containers.admin]\nenabled = true\n[settings.kubernetes.node-labels]\n'custom' = 'yes'\n",
			wantInUserData: []string{"[settings.host-containers.admin]", "000-mount-instance-storage", "max-pods = 58"}},
		{alias: "windows2022@latest", wantOS: "windows",
			userData:       "<powershell>\nWrite-Host custom-windows\n</powershell>",
			wantInUserData: []string{"Write-Host custom-windows", "Start-EKSBootstrap.ps1", "-KubeletExtraArgs"}},
	}
	for _, tc := range cases {
		t.Run(tc.alias, func(t *testing.T) {
			f := newFixture(t)
			f.nodeClasses["default"] = testNodeClass(func(nc *apisv1.EC2NodeClass) {
				nc.Spec.AMISelectorTerms = []apisv1.AMISelectorTerm{{Alias: tc.alias}}
				nc.Spec.UserData = aws.String(tc.userData)
				nc.Spec.Kubelet = &apisv1.KubeletConfiguration{MaxPods: ptrTo(int32(58))}
				if tc.wantOS != "windows" {
					nc.Spec.InstanceStorePolicy = ptrTo(apisv1.InstanceStorePolicyRAID0)
				}
			})
			resp, err := f.provider.Launch(context.Background(), launchRequest("default-"+strings.Split(tc.alias, "@")[0], f.option("m5.large", activities.CapacityTypeOnDemand)))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Labels[corev1.LabelOSStable] != tc.wantOS {
				t.Errorf("launch response os label %q, want %q", resp.Labels[corev1.LabelOSStable], tc.wantOS)
			}
			f.emuClock.Step(time.Minute)
			f.emu.Reconcile(context.Background())
			node, ok := f.nodes.byProviderID(resp.ProviderID)
			if !ok {
				t.Fatalf("no Node registered for %s: %+v", resp.ProviderID, f.emu.State().Instances)
			}
			if node.Labels[corev1.LabelOSStable] != tc.wantOS || node.Status.NodeInfo.OperatingSystem != tc.wantOS {
				t.Errorf("Node os %q/%q, want %q", node.Labels[corev1.LabelOSStable], node.Status.NodeInfo.OperatingSystem, tc.wantOS)
			}
			if node.Labels["team"] != "a" || node.Labels[apisv1.LabelNodePool] != "default" {
				t.Errorf("Node labels %v, want the request's and the pool's", node.Labels)
			}
			var taints []string
			for _, taint := range node.Spec.Taints {
				taints = append(taints, taint.ToString())
			}
			for _, want := range []string{"dedicated=batch:NoSchedule", "example.com/agent-not-ready:NoExecute", activities.UnregisteredTaintKey + ":NoExecute"} {
				if !strings.Contains(strings.Join(taints, ","), want) {
					t.Errorf("Node taints %v, want %s", taints, want)
				}
			}
			if pods := node.Status.Capacity.Pods().Value(); pods != 58 {
				t.Errorf("Node pods capacity %d, want the class's maxPods 58", pods)
			}
			userData := f.instanceUserData(t, resp.InstanceID)
			for _, want := range tc.wantInUserData {
				if !strings.Contains(userData, want) {
					t.Errorf("userData does not contain %q:\n%s", want, userData)
				}
			}
		})
	}
}

// instanceUserData is the decoded userData the instance booted with.
func (f *fixture) instanceUserData(t *testing.T, instanceID string) string {
	t.Helper()
	encoded, ok := f.emu.InstanceUserData(instanceID)
	if !ok {
		t.Fatalf("instance %s unknown to the emulator", instanceID)
	}
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestInstanceProfileLifecycle: a class with a role gets a managed,
// tagged profile holding it; a new role replaces the old one in place;
// once the class is gone and none of its instances is left, garbage
// collection removes the profile.
func TestInstanceProfileLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	manager := f.provider.InstanceProfiles
	name, err := manager.Ensure(ctx, testNodeClass())
	if err != nil {
		t.Fatal(err)
	}
	profiles := f.emu.InstanceProfiles()
	if len(profiles) != 1 || profiles[0].Name != name || profiles[0].Path != "/millwright/"+testRegion+"/"+testCluster+"/" {
		t.Fatalf("profiles %+v, want %s under the cluster's path", profiles, name)
	}
	wantTags := map[string]string{
		"kubernetes.io/cluster/" + testCluster: "owned", TagCluster: testCluster,
		apisv1.TagNodeClass: "default", TagRegion: testRegion,
	}
	for k, v := range wantTags {
		if profiles[0].Tags[k] != v {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, profiles[0].Tags[k], v, profiles[0].Tags)
		}
	}
	if len(profiles[0].Roles) != 1 || profiles[0].Roles[0] != testRole {
		t.Errorf("roles %v, want %s", profiles[0].Roles, testRole)
	}

	if _, err := manager.Ensure(ctx, testNodeClass(func(nc *apisv1.EC2NodeClass) { nc.Spec.Role = testRole + "-v2" })); err != nil {
		t.Fatal(err)
	}
	got, err := f.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != testRole+"-v2" {
		t.Errorf("after the role changed the profile holds %v", got.InstanceProfile.Roles)
	}

	// An instance of the class keeps its profile even after the class is
	// deleted.
	resp, err := f.provider.Launch(ctx, launchRequest("default-ip", f.option("m5.large", activities.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	gone := func(context.Context, string) (bool, error) { return false, nil }
	if deleted, waiting, err := manager.GarbageCollect(ctx, gone); err != nil || len(deleted) != 0 || len(waiting) != 1 {
		t.Fatalf("GarbageCollect with an instance left: deleted %v, waiting %v, %v", deleted, waiting, err)
	}
	if _, err := f.provider.TerminateInstance(ctx, activities.TerminateInstanceRequest{InstanceID: resp.InstanceID}); err != nil {
		t.Fatal(err)
	}
	f.emuClock.Step(time.Minute)
	f.emu.Reconcile(ctx)
	exists := func(context.Context, string) (bool, error) { return true, nil }
	if deleted, _, err := manager.GarbageCollect(ctx, exists); err != nil || len(deleted) != 0 {
		t.Fatalf("GarbageCollect with the class present: deleted %v, %v", deleted, err)
	}
	deleted, _, err := manager.GarbageCollect(ctx, gone)
	if err != nil || len(deleted) != 1 || deleted[0] != name {
		t.Fatalf("GarbageCollect: deleted %v, %v; want %s", deleted, err, name)
	}
	if left := f.emu.InstanceProfiles(); len(left) != 0 {
		t.Errorf("profiles left: %+v", left)
	}
}
