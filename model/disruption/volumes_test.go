package disruption_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/packer"
	"github.com/millwright/millwright/model/scheduling"
)

// boundVolume is a claim name-claim bound to volume name, whose node
// affinity is one term of exprs; source, when not nil, sets the volume's
// kind (local, hostPath).
func boundVolume(name string, source func(*corev1.PersistentVolume), exprs ...corev1.NodeSelectorRequirement) packer.Storage {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}}
	if source != nil {
		source(pv)
	}
	return packer.Storage{
		PersistentVolumes: []*corev1.PersistentVolume{pv},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: name}}},
	}
}

func in(key, value string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
}

func withClaim(claim string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func withStorage(in disruption.Input, s packer.Storage) disruption.Input {
	in.Storage = s
	return in
}

func localVolume(pv *corev1.PersistentVolume) {
	pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disks/ssd1"}
}

// A pod's volumes hold it where they are in every simulation, as they do in
// provisioning (Karpenter's scheduler applies volumetopology.go to
// consolidation and drift too): a pod on a zonal EBS volume is never
// planned onto a node of another zone, where kube-scheduler would leave it
// Pending.
func TestConsolidationHonoursVolumeTopology(t *testing.T) {
	// b1's pod would fit the free room of a1 (zone-a), but its volume is in
	// zone-b: deleting b1 would strand it.
	cluster := func(s packer.Storage, podOpts ...podOpt) disruption.Input {
		return withStorage(input(pools(pool("default", launchTypes(threeZoneTypes()), consolidateAfter("1m"))),
			node("b1", "default", "c.large", inZone("zone-b"), running(pod("db", "1", "1Gi", podOpts...))),
			node("a1", "default", "c.xlarge", inZone("zone-a"), running(pod("o", "1", "1Gi", otherApp)), lastPodEvent(now))), s)
	}
	runCases(t, []computeCase{
		{
			name:   "without a volume the pod moves to the other zone's free node",
			source: "consolidation_test.go: Delete / can delete nodes (control)",
			in:     cluster(packer.Storage{}),
			want:   []string{"Underutilized/delete [b1]"},
		},
		{
			name:   "a pod on a zonal volume is replaced in its volume's zone",
			source: "provisioning suite_test: Volume Topology Requirements, in a consolidation simulation",
			in:     cluster(boundVolume("pv-b", nil, in(scheduling.LabelZone, "zone-b")), withClaim("pv-b-claim")),
			want:   []string{"Underutilized/replace [b1] → [c.small/on-demand]"},
		},
		{
			name:   "the EBS CSI driver's zone key holds it too",
			source: "provisioning suite_test: Volume Topology Requirements (topology.ebs.csi.aws.com/zone)",
			in:     cluster(boundVolume("pv-b", nil, in("topology.ebs.csi.aws.com/zone", "zone-b")), withClaim("pv-b-claim")),
			want:   []string{"Underutilized/replace [b1] → [c.small/on-demand]"},
		},
		{
			name:   "a volume in the free node's zone lets the pod move",
			source: "provisioning suite_test: Volume Topology Requirements, in a consolidation simulation",
			in:     cluster(boundVolume("pv-a", nil, in(scheduling.LabelZone, "zone-a")), withClaim("pv-a-claim")),
			want:   []string{"Underutilized/delete [b1]"},
		},
		{
			name:   "a local volume's hostname does not hold the pod",
			source: "disruption suite_test: can replace node with a local PV (ignoring hostname affinity)",
			in:     cluster(boundVolume("local-b1", localVolume, in(scheduling.LabelHostname, "b1")), withClaim("local-b1-claim")),
			want:   []string{"Underutilized/delete [b1]"},
		},
		{
			name:     "a claim that does not exist: the pod fits nowhere, the node stays",
			source:   "provisioning suite_test: should not schedule if invalid pvc",
			in:       cluster(packer.Storage{}, withClaim("missing")),
			want:     nil,
			verdicts: map[string]string{"b1": "persistentvolumeclaim default/missing does not exist"},
		},
	})

	t.Run("the replacement launches in the volume's zone", func(t *testing.T) {
		r := disruption.Compute(cluster(boundVolume("pv-b", nil, in(scheduling.LabelZone, "zone-b")), withClaim("pv-b-claim")))
		if len(r.Commands) != 1 || len(r.Commands[0].Replacements) != 1 {
			t.Fatalf("want one replacement, got %q", summaries(r))
		}
		plan := r.Commands[0].Replacements[0]
		for _, o := range plan.Options {
			if z := plan.ZoneOf(o); z != "zone-b" {
				t.Errorf("option %s in %s, want zone-b only", o.InstanceType, z)
			}
		}
		if !slices.Equal(plan.Zones, []string{"zone-b"}) {
			t.Errorf("plan zones %v, want [zone-b]", plan.Zones)
		}
	})
}
