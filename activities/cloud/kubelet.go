package cloud

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/userdata"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
)

// KubeletSettings are the settings of an EC2NodeClass's kubelet that change
// what its nodes offer pods (nil when the class sets none).
func KubeletSettings(k *apisv1.KubeletConfiguration) *catalog.KubeletSettings {
	if k == nil {
		return nil
	}
	return &catalog.KubeletSettings{
		MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
		KubeReserved: k.KubeReserved, SystemReserved: k.SystemReserved,
		EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
	}
}

// withKubelet returns the types with the capacity and allocatable the
// class's kubelet settings leave (copies; the shared types are untouched).
func (p *Provider) withKubelet(ctx context.Context, nc *apisv1.EC2NodeClass, types []*catalog.InstanceType) ([]*catalog.InstanceType, error) {
	k := KubeletSettings(nc.Spec.Kubelet)
	if k == nil {
		return types, nil
	}
	out := make([]*catalog.InstanceType, 0, len(types))
	for _, it := range types {
		spec, ok := p.InstanceTypes.Spec(ctx, it.Name)
		if !ok {
			out = append(out, it)
			continue
		}
		capacity, allocatable, err := spec.WithKubelet(k)
		if err != nil {
			return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.kubelet", err.Error())
		}
		c := *it
		c.Capacity, c.Allocatable = capacity, allocatable
		out = append(out, &c)
	}
	return out, nil
}

// applyKubelet puts the class's kubelet settings in the nodeadm document.
func applyKubelet(doc *userdata.AL2023, k *apisv1.KubeletConfiguration) {
	if k == nil {
		return
	}
	if k.MaxPods != nil {
		doc.MaxPods = *k.MaxPods
	}
	if len(k.ClusterDNS) > 0 {
		doc.ClusterDNS = k.ClusterDNS
	}
	doc.PodsPerCore = aws.ToInt32(k.PodsPerCore)
	doc.KubeReserved = k.KubeReserved
	doc.SystemReserved = k.SystemReserved
	doc.EvictionHard = k.EvictionHard
	doc.EvictionSoft = k.EvictionSoft
	if len(k.EvictionSoftGracePeriod) > 0 {
		doc.EvictionSoftGracePeriod = map[string]string{}
		for signal, d := range k.EvictionSoftGracePeriod {
			doc.EvictionSoftGracePeriod[signal] = string(d)
		}
	}
	doc.EvictionMaxPodGracePeriod = aws.ToInt32(k.EvictionMaxPodGracePeriod)
	doc.ImageGCHighThresholdPercent = k.ImageGCHighThresholdPercent
	doc.ImageGCLowThresholdPercent = k.ImageGCLowThresholdPercent
	doc.CPUCFSQuota = k.CPUCFSQuota
}
