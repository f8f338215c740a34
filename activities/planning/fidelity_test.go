package planning

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/local/cluster/clustertesting"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// The planner reads what the packer needs beyond pods and nodes from the
// cluster: a PVC bound to a zonal volume pins its pod's node to the
// volume's zone, Namespace labels resolve namespaceSelector, and a
// requirement's minValues reaches the launch options.
func TestPlanReadsVolumesNamespacesAndMinValues(t *testing.T) {
	requireStack(t)
	planner := newPlanner(t, testProvider)
	nodeClass := createNodeClass(t)
	ns := clustertesting.CreateNamespace(t, testClientset, "fidelity")
	ctx := t.Context()

	t.Run("a claim bound to a zonal volume pins the zone", func(t *testing.T) {
		pool := newPool(nodeClass).onDemandTypes("m5.large").create(t)
		createZonalClaim(t, ns, "data", "us-east-1c")
		key := newPod(ns, clustertesting.UniqueName("db"), "500m", "1Gi").selectPool(pool).withClaim("data").createPending(t)

		resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: []string{key}})

		plans := plansOfPool(resp, pool)
		if len(plans) != 1 {
			t.Fatalf("%d plans, want 1: %+v", len(plans), resp)
		}
		for _, o := range plans[0].InstanceTypeOptions {
			for _, off := range o.Offerings {
				if off.Zone != "us-east-1c" {
					t.Errorf("option %s offered in %s, want the volume's zone us-east-1c", o.Name, off.Zone)
				}
			}
		}
	})

	t.Run("minValues reaches the launch options", func(t *testing.T) {
		pool := newPool(nodeClass).mutate(func(np *apisv1.NodePool) {
			three := 3
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				apisv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn,
					Values: []string{"m5.large", "m5.xlarge", "c5.xlarge", "r5.large"}, MinValues: &three},
				apisv1.NodeSelectorRequirementWithMinValues{Key: apisv1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{apisv1.CapacityTypeOnDemand}})
		}).create(t)
		keys := createPendingPods(t, ns, pool, 1, "500m", "1Gi")

		resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: keys})

		plans := plansOfPool(resp, pool)
		if len(plans) != 1 || len(plans[0].InstanceTypeOptions) < 3 {
			t.Fatalf("want one plan with >= 3 instance type options: %+v", resp)
		}
	})

	t.Run("namespaceSelector reads Namespace labels", func(t *testing.T) {
		pool := newPool(nodeClass).onDemandTypes("m5.large").create(t)
		other := clustertesting.CreateNamespace(t, testClientset, "fidelity-team")
		nsObj, err := testClientset.CoreV1().Namespaces().Get(ctx, other, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels["team"] = "payments"
		if _, err := testClientset.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		node := newNode("4", "16Gi").label(poolLabel, pool).createReady(t)
		db := newPod(other, clustertesting.UniqueName("db"), "100m", "128Mi").bindTo(node)
		db.pod.Labels = map[string]string{"app": "db"}
		db.create(t)
		away := newPod(ns, clustertesting.UniqueName("away"), "250m", "512Mi").selectPool(pool)
		away.pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
		}}}}
		key := away.createPending(t)

		resp := plan(t, planner, activities.PlanRequest{Cluster: testClusterName, PodKeys: []string{key}})

		if resp.PlacedOnExisting != 0 || len(plansOfPool(resp, pool)) != 1 {
			t.Fatalf("the pod must avoid the db's node (its namespace is selected by label): %+v", resp)
		}
	})
}

// createZonalClaim creates claim name in ns, bound to a new EBS volume in
// zone (node affinity on the EBS CSI driver's zone key).
func createZonalClaim(t *testing.T, ns, name, zone string) {
	t.Helper()
	ctx := t.Context()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: clustertesting.UniqueName("pv")},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123456789abcdef0"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.ebs.csi.aws.com/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
	if _, err := testClientset.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testClientset.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       pv.Name,
			StorageClassName: &empty,
		},
	}
	if _, err := testClientset.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// withClaim mounts claim as the pod's volume "data".
func (b *podBuilder) withClaim(claim string) *podBuilder {
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, corev1.Volume{Name: "data",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	return b
}
