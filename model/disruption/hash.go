package disruption

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// Hash versions. A node whose stamp has another version than the current
// one is not drifted by the hash (Karpenter's rule): the field set changed,
// not the user's spec. Bump a version when a field joins or leaves its
// hash, or when a hashed field's default changes.
const (
	NodePoolHashVersion  = "v1"
	NodeClassHashVersion = "v1"
)

// nodePoolTemplateFields is what a NodePool template hash covers:
// Karpenter's field set. Requirements are excluded (requirement drift is
// judged against the node's labels instead), as are budgets and every
// other non-template field.
type nodePoolTemplateFields struct {
	Labels                 map[string]string          `json:"labels,omitempty"`
	Annotations            map[string]string          `json:"annotations,omitempty"`
	Taints                 []corev1.Taint             `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint             `json:"startupTaints,omitempty"`
	NodeClassRef           *apisv1.NodeClassReference `json:"nodeClassRef,omitempty"`
	ExpireAfter            apisv1.DurationOrNever     `json:"expireAfter,omitempty"`
	TerminationGracePeriod *apisv1.Duration           `json:"terminationGracePeriod,omitempty"`
}

// NodePoolHash is the hash of np's template that a node launched from it
// is stamped with (apisv1.AnnotationNodePoolHash): labels, annotations,
// taints, startupTaints (as sets), nodeClassRef, expireAfter and
// terminationGracePeriod. Call it on a defaulted pool.
func NodePoolHash(np *apisv1.NodePool) string {
	t := &np.Spec.Template
	return hashOf(nodePoolTemplateFields{
		Labels:                 emptyAsNil(t.Labels),
		Annotations:            emptyAsNil(t.Annotations),
		Taints:                 sortedTaints(t.Spec.Taints),
		StartupTaints:          sortedTaints(t.Spec.StartupTaints),
		NodeClassRef:           t.Spec.NodeClassRef,
		ExpireAfter:            t.Spec.ExpireAfter,
		TerminationGracePeriod: t.Spec.TerminationGracePeriod,
	})
}

// nodeClassFields is what an EC2NodeClass hash covers: Karpenter's field
// set. The selector terms are excluded (what they resolve to is compared
// instead: AMI, subnet and security-group drift), and the AMI family is
// hashed as resolved (an alias's family), not as written.
type nodeClassFields struct {
	AMIFamily                string                       `json:"amiFamily,omitempty"`
	UserData                 *string                      `json:"userData,omitempty"`
	Role                     string                       `json:"role,omitempty"`
	InstanceProfile          *string                      `json:"instanceProfile,omitempty"`
	Tags                     map[string]string            `json:"tags,omitempty"`
	Kubelet                  *apisv1.KubeletConfiguration `json:"kubelet,omitempty"`
	BlockDeviceMappings      []apisv1.BlockDeviceMapping  `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy      *apisv1.InstanceStorePolicy  `json:"instanceStorePolicy,omitempty"`
	AssociatePublicIPAddress *bool                        `json:"associatePublicIPAddress,omitempty"`
	DetailedMonitoring       *bool                        `json:"detailedMonitoring,omitempty"`
	MetadataOptions          *apisv1.MetadataOptions      `json:"metadataOptions,omitempty"`
}

// NodeClassHash is the hash of nc that a node launched from it is stamped
// with (apisv1.AnnotationNodeClassHash). Call it on a defaulted class.
func NodeClassHash(nc *apisv1.EC2NodeClass) string {
	s := &nc.Spec
	return hashOf(nodeClassFields{
		AMIFamily:                nc.AMIFamily(),
		UserData:                 s.UserData,
		Role:                     s.Role,
		InstanceProfile:          s.InstanceProfile,
		Tags:                     emptyAsNil(s.Tags),
		Kubelet:                  s.Kubelet,
		BlockDeviceMappings:      s.BlockDeviceMappings,
		InstanceStorePolicy:      s.InstanceStorePolicy,
		AssociatePublicIPAddress: s.AssociatePublicIPAddress,
		DetailedMonitoring:       s.DetailedMonitoring,
		MetadataOptions:          s.MetadataOptions,
	})
}

// hashOf is the FNV-64a of v's JSON (map keys sorted by encoding/json),
// in decimal.
func hashOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// The field structs hold only plain data; this cannot happen.
		panic("disruption: hashing: " + err.Error())
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}

// sortedTaints orders taints so the hash treats them as a set.
func sortedTaints(taints []corev1.Taint) []corev1.Taint {
	if len(taints) == 0 {
		return nil
	}
	out := make([]corev1.Taint, len(taints))
	for i, t := range taints {
		out[i] = corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
	}
	slices.SortFunc(out, func(a, b corev1.Taint) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Effect), string(b.Effect)); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	return out
}

func emptyAsNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// HashAnnotations are the drift stamps of np and nc (nc may be nil): their
// hashes and hash versions, under the annotation keys a NodePool, an
// EC2NodeClass and each Node and NodeClaim launched from them carry. Call
// it on a defaulted pool and class.
func HashAnnotations(np *apisv1.NodePool, nc *apisv1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	if np != nil {
		out[apisv1.AnnotationNodePoolHash] = NodePoolHash(np)
		out[apisv1.AnnotationNodePoolHashVersion] = NodePoolHashVersion
	}
	if nc != nil {
		out[apisv1.AnnotationNodeClassHash] = NodeClassHash(nc)
		out[apisv1.AnnotationNodeClassHashVersion] = NodeClassHashVersion
	}
	return out
}
