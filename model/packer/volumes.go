package packer

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/millwright/millwright/model/scheduling"
)

// Storage is what the packer reads of the pods' volumes: a PVC bound to a
// PersistentVolume with node affinity (a zonal EBS volume) pins its pods to
// the volume's topology; an unbound PVC of a WaitForFirstConsumer
// StorageClass with allowedTopologies limits them to those topologies, as
// Karpenter's volumetopology.go does.
type Storage struct {
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
}

// defaultStorageClassAnnotation marks the StorageClass a PVC without a
// class name gets.
const defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// storageIndex looks storage objects up by name.
type storageIndex struct {
	pvcs    map[string]*corev1.PersistentVolumeClaim // namespace/name
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
	deflt   *storagev1.StorageClass
}

func newStorageIndex(s Storage) *storageIndex {
	ix := &storageIndex{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for _, c := range s.PersistentVolumeClaims {
		ix.pvcs[c.Namespace+"/"+c.Name] = c
	}
	for _, v := range s.PersistentVolumes {
		ix.pvs[v.Name] = v
	}
	classes := append([]*storagev1.StorageClass(nil), s.StorageClasses...)
	sort.SliceStable(classes, func(i, j int) bool { return classes[i].Name < classes[j].Name })
	for _, c := range classes {
		ix.classes[c.Name] = c
		if c.Annotations[defaultStorageClassAnnotation] == "true" && ix.deflt == nil {
			ix.deflt = c
		}
	}
	return ix
}

// volumeTopology is one volume's node requirements as ORed node selector
// terms, and where they come from (for messages and the class key).
type volumeTopology struct {
	source string
	terms  []corev1.NodeSelectorTerm
}

// volumeError says a pod cannot be scheduled until its storage exists
// (Karpenter's "should not schedule if invalid pvc" and missing or empty
// storage class of an unbound claim).
type volumeError struct{ msg string }

func (e *volumeError) Error() string { return e.msg }

// podVolumeTopology lists the topology each of the pod's claims imposes,
// or why the pod cannot be scheduled yet: a claim that does not exist, or
// an unbound claim whose storage class is missing. A bound claim whose
// volume is not known imposes nothing.
func (ix *storageIndex) podVolumeTopology(pod *corev1.Pod) ([]volumeTopology, error) {
	var out []volumeTopology
	for _, v := range pod.Spec.Volumes {
		var claimName, className string
		switch {
		case v.PersistentVolumeClaim != nil:
			claimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
			// The generic ephemeral volume's claim is named pod-volume.
			claimName = pod.Name + "-" + v.Name
			if sc := v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName; sc != nil {
				className = *sc
			}
		default:
			continue
		}
		pvc := ix.pvcs[namespaceOf(pod)+"/"+claimName]
		if pvc == nil && v.PersistentVolumeClaim != nil {
			return nil, &volumeError{fmt.Sprintf("volume %s: persistentvolumeclaim %s/%s does not exist", v.Name, namespaceOf(pod), claimName)}
		}
		if pvc != nil {
			if pvc.Spec.VolumeName != "" {
				pv := ix.pvs[pvc.Spec.VolumeName]
				if pv != nil && pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
					if terms, pinned := volumeTerms(pv); pinned {
						out = append(out, volumeTopology{source: "persistentvolume " + pv.Name, terms: terms})
					}
				}
				continue
			}
			if pvc.Spec.StorageClassName != nil {
				className = *pvc.Spec.StorageClassName
			}
		}
		sc := ix.classes[className]
		if className == "" {
			sc = ix.deflt
		}
		if sc == nil {
			name := className
			if name == "" {
				name = "(default)"
			}
			return nil, &volumeError{fmt.Sprintf("volume %s: storageclass %s of the unbound claim does not exist", v.Name, name)}
		}
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || len(sc.AllowedTopologies) == 0 {
			continue
		}
		var terms []corev1.NodeSelectorTerm
		for _, t := range sc.AllowedTopologies {
			var term corev1.NodeSelectorTerm
			for _, e := range t.MatchLabelExpressions {
				term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
			}
			terms = append(terms, term)
		}
		out = append(out, volumeTopology{source: "storageclass " + sc.Name + " allowedTopologies", terms: terms})
	}
	return out, nil
}

// volumeTerms are the node selector terms a bound volume pins its pods to
// (ORed), and whether it pins them at all. A local or hostPath volume's
// hostname is dropped, as Karpenter's volumetopology.go drops it: the pod
// is being placed anew (its node is gone or being disrupted), and no new
// node can carry the old node's name. A term left with nothing in it
// admits every node, so the volume pins nothing.
func volumeTerms(pv *corev1.PersistentVolume) ([]corev1.NodeSelectorTerm, bool) {
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if pv.Spec.Local == nil && pv.Spec.HostPath == nil {
		return terms, true
	}
	out := make([]corev1.NodeSelectorTerm, 0, len(terms))
	for _, term := range terms {
		var kept corev1.NodeSelectorTerm
		for _, e := range term.MatchExpressions {
			if e.Key != corev1.LabelHostname {
				kept.MatchExpressions = append(kept.MatchExpressions, e)
			}
		}
		if len(kept.MatchExpressions) == 0 {
			return nil, false
		}
		out = append(out, kept)
	}
	return out, true
}

// key identifies the topologies for class grouping.
func volumeKey(vts []volumeTopology) string {
	var sb strings.Builder
	for _, vt := range vts {
		sb.WriteString(vt.source)
		sb.WriteByte(';')
	}
	return sb.String()
}

// withVolumeTopology ANDs alternatives with every volume's ORed terms.
func withVolumeTopology(alts []scheduling.Requirements, vts []volumeTopology) ([]scheduling.Requirements, error) {
	for _, vt := range vts {
		var next []scheduling.Requirements
		for i, term := range vt.terms {
			rs, err := scheduling.RequirementsFromNodeSelector(term.MatchExpressions)
			if err != nil {
				return nil, fmt.Errorf("%s: nodeSelectorTerms[%d]: %w", vt.source, i, err)
			}
			for _, alt := range alts {
				both := alt.Intersect(rs)
				if both.Satisfiable() == nil {
					next = append(next, both)
				}
			}
		}
		alts = next
	}
	return alts, nil
}

// VolumeConstraints applies the pods' volume topology where pods are placed
// without Pack (disruption's quick fit), so both place a pod alike.
type VolumeConstraints struct{ ix *storageIndex }

// NewVolumeConstraints indexes s.
func NewVolumeConstraints(s Storage) *VolumeConstraints {
	return &VolumeConstraints{ix: newStorageIndex(s)}
}

// Constrain ANDs a pod's requirement alternatives with its volumes'
// topology (no alternative left: no node suits it). An error says why the
// pod cannot be placed at all: a claim or an unbound claim's storage class
// that does not exist.
func (v *VolumeConstraints) Constrain(pod *corev1.Pod, alts []scheduling.Requirements) ([]scheduling.Requirements, error) {
	if len(pod.Spec.Volumes) == 0 {
		return alts, nil
	}
	vts, err := v.ix.podVolumeTopology(pod)
	if err != nil || len(vts) == 0 {
		return alts, err
	}
	return withVolumeTopology(alts, vts)
}
