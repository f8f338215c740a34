package disruption_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/disruption"
	"github.com/millwright/millwright/model/scheduling"
)

var benchZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// catalogTypes are the 1,101 catalog types, on-demand at the catalog price
// and spot at a third of it, in three zones.
func catalogTypes() []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, spec := range catalog.MustDefault().InstanceTypes {
		offerings := spec.OnDemandOfferings(benchZones)
		for i, z := range benchZones {
			offerings = append(offerings, catalog.Offering{Zone: z, CapacityType: apisv1.CapacityTypeSpot,
				Price: spec.OnDemandPrice * (0.30 + 0.02*float64(i)), Available: true})
		}
		out = append(out, spec.InstanceType(offerings))
	}
	return out
}

// benchCluster is nodes nodes of five common types, each running
// podsPerNode pods of ten deployments: the large types are mostly idle, so
// consolidation has plenty to weigh. With volumes, the pods of three other
// deployments each mount a claim bound to a zonal volume in their node's
// zone (StatefulSets on EBS): every simulation reads the claims.
func benchCluster(nodes, podsPerNode int, spread, volumes bool) disruption.Input {
	types := catalogTypes()
	byName := map[string]*catalog.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	np := pool("default", launchTypes(types), spotLaunches, consolidateAfter("30s"))
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []string{"m5.xlarge", "m5.2xlarge", "c5.2xlarge", "r5.xlarge", "m5.4xlarge"}
	in := disruption.Input{Now: now, NodePools: pools(np)}
	for i := range nodes {
		it := byName[shapes[i%len(shapes)]]
		ct := apisv1.CapacityTypeOnDemand
		if i%5 == 4 {
			ct = apisv1.CapacityTypeSpot
		}
		z := benchZones[i%len(benchZones)]
		price := 0.0
		for _, o := range it.Offerings {
			if o.Zone == z && o.CapacityType == ct {
				price = o.Price
			}
		}
		name := fmt.Sprintf("node-%03d", i)
		n := disruption.Node{
			ClaimName: name, Name: name, NodePool: "default", InstanceType: it.Name, Zone: z, CapacityType: ct, Price: price,
			Allocatable: it.Allocatable, CreatedAt: now.Add(-time.Duration(rng.IntN(600)) * time.Hour), Initialized: true,
			LastPodEventAt: now.Add(-time.Hour), Ready: corev1.ConditionTrue, ReadySince: now.Add(-time.Hour),
			Labels: map[string]string{
				scheduling.LabelNodePool: "default", scheduling.LabelInstanceType: it.Name, scheduling.LabelZone: z,
				scheduling.LabelCapacityType: ct, scheduling.LabelHostname: name,
				scheduling.LabelArch: it.Labels[scheduling.LabelArch], scheduling.LabelOS: "linux",
			},
		}
		for j := range podsPerNode {
			d := rng.IntN(10)
			p := pod(fmt.Sprintf("deploy-%d-%s-%d", d, name, j), fmt.Sprintf("%dm", 100+30*d), fmt.Sprintf("%dMi", 128+110*d))
			p.Labels["app"] = fmt.Sprintf("deploy-%d", d)
			if spread && d < 3 {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: scheduling.LabelZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}
			}
			if volumes && d >= 7 {
				claim := p.Name + "-data"
				storage := boundVolume(p.Name, nil, corev1.NodeSelectorRequirement{
					Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}})
				storage.PersistentVolumeClaims[0].Name = claim
				in.Storage.PersistentVolumes = append(in.Storage.PersistentVolumes, storage.PersistentVolumes...)
				in.Storage.PersistentVolumeClaims = append(in.Storage.PersistentVolumeClaims, storage.PersistentVolumeClaims...)
				withClaim(claim)(p)
			}
			running(p)(&n)
		}
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

// BenchmarkCompute is one disruption pass over 500 nodes and 5,000 pods
// with the full catalog as replacement options: candidates, budgets, the
// multi-node search, then single-node consolidation of every remaining
// candidate. "10%" is the default budget (the multi-node search takes it
// all); "100%" leaves every node to weigh, the worst case. With "spread",
// three of the ten deployments spread over zones, so every simulation runs
// the packer (topology) instead of the quick first fit. With "volumes",
// 1,500 of the pods each have their own claim and zonal volume.
func BenchmarkCompute(b *testing.B) {
	for _, bc := range []struct {
		nodes           string
		spread, volumes bool
	}{{"10%", false, false}, {"100%", false, false}, {"10%", true, false}, {"100%", true, false}, {"10%", true, true}, {"100%", true, true}} {
		name := "budget=" + bc.nodes
		if bc.spread {
			name += "/spread"
		}
		if bc.volumes {
			name += "/volumes"
		}
		nodes := bc.nodes
		b.Run(name, func(b *testing.B) {
			in := benchCluster(500, 10, bc.spread, bc.volumes)
			in.NodePools[0].Pool.Spec.Disruption.Budgets = []apisv1.Budget{{Nodes: nodes}}
			var r disruption.Result
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r = disruption.Compute(in)
			}
			b.StopTimer()
			moved, saved := 0, 0.0
			for _, c := range r.Commands {
				moved += len(c.Candidates)
				saved += c.SavingsPerHour
			}
			b.ReportMetric(float64(len(r.Commands)), "commands")
			b.ReportMetric(float64(moved), "candidates")
			b.ReportMetric(saved, "$/h-saved")
		})
	}
}
