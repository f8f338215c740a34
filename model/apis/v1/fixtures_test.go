package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodePoolBuilder builds NodePools for tests: aNodePool() is valid, and each
// with… method changes one thing, so a table row reads as the one fault it
// injects.
type nodePoolBuilder struct{ np NodePool }

// aNodePool is a valid pool "default" with two requirements (so a requirement
// a test adds is requirements[2]).
func aNodePool() *nodePoolBuilder {
	return &nodePoolBuilder{np: NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: NodePoolSpec{
			Template: NodeClaimTemplate{
				Spec: NodeClaimTemplateSpec{
					Requirements: []NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.2xlarge"}},
						{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}},
					},
					NodeClassRef: &NodeClassReference{Group: Group, Kind: "EC2NodeClass", Name: "default"},
				},
			},
		},
	}}
}

func (b *nodePoolBuilder) build() *NodePool { return b.np.DeepCopy() }

func (b *nodePoolBuilder) with(change func(*NodePool)) *nodePoolBuilder {
	change(&b.np)
	return b
}

func (b *nodePoolBuilder) withName(name string) *nodePoolBuilder {
	b.np.Name = name
	return b
}

func (b *nodePoolBuilder) withRequirement(key string, op corev1.NodeSelectorOperator, values ...string) *nodePoolBuilder {
	b.np.Spec.Template.Spec.Requirements = append(b.np.Spec.Template.Spec.Requirements,
		NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	return b
}

// withMinValues sets minValues on the last requirement.
func (b *nodePoolBuilder) withMinValues(n int) *nodePoolBuilder {
	reqs := b.np.Spec.Template.Spec.Requirements
	reqs[len(reqs)-1].MinValues = &n
	return b
}

func (b *nodePoolBuilder) withLabel(key, value string) *nodePoolBuilder {
	if b.np.Spec.Template.Labels == nil {
		b.np.Spec.Template.Labels = map[string]string{}
	}
	b.np.Spec.Template.Labels[key] = value
	return b
}

func (b *nodePoolBuilder) withTaint(key, value string, effect corev1.TaintEffect) *nodePoolBuilder {
	b.np.Spec.Template.Spec.Taints = append(b.np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

func (b *nodePoolBuilder) withStartupTaint(key, value string, effect corev1.TaintEffect) *nodePoolBuilder {
	b.np.Spec.Template.Spec.StartupTaints = append(b.np.Spec.Template.Spec.StartupTaints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

func (b *nodePoolBuilder) withNodeClassRef(group, kind, name string) *nodePoolBuilder {
	b.np.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Group: group, Kind: kind, Name: name}
	return b
}

func (b *nodePoolBuilder) withExpireAfter(d DurationOrNever) *nodePoolBuilder {
	b.np.Spec.Template.Spec.ExpireAfter = d
	return b
}

func (b *nodePoolBuilder) withTerminationGracePeriod(d Duration) *nodePoolBuilder {
	b.np.Spec.Template.Spec.TerminationGracePeriod = &d
	return b
}

func (b *nodePoolBuilder) withConsolidation(policy ConsolidationPolicy, after DurationOrNever) *nodePoolBuilder {
	b.np.Spec.Disruption.ConsolidationPolicy = policy
	b.np.Spec.Disruption.ConsolidateAfter = after
	return b
}

func (b *nodePoolBuilder) withBudget(nodes string, reasons ...DisruptionReason) *nodePoolBuilder {
	b.np.Spec.Disruption.Budgets = append(b.np.Spec.Disruption.Budgets, Budget{Nodes: nodes, Reasons: reasons})
	return b
}

// withBudgetWindow sets the cron window of the last budget; "" leaves a part
// unset.
func (b *nodePoolBuilder) withBudgetWindow(schedule string, duration Duration) *nodePoolBuilder {
	budget := &b.np.Spec.Disruption.Budgets[len(b.np.Spec.Disruption.Budgets)-1]
	if schedule != "" {
		budget.Schedule = &schedule
	}
	if duration != "" {
		budget.Duration = &duration
	}
	return b
}

func (b *nodePoolBuilder) withLimit(name corev1.ResourceName, quantity string) *nodePoolBuilder {
	if b.np.Spec.Limits == nil {
		b.np.Spec.Limits = Limits{}
	}
	b.np.Spec.Limits[name] = resource.MustParse(quantity)
	return b
}

func (b *nodePoolBuilder) withWeight(w int32) *nodePoolBuilder {
	b.np.Spec.Weight = &w
	return b
}

func (b *nodePoolBuilder) withMinNodes(n int32) *nodePoolBuilder {
	b.np.Spec.MinNodes = &n
	return b
}

// ec2NodeClassBuilder builds EC2NodeClasses the same way.
type ec2NodeClassBuilder struct{ nc EC2NodeClass }

// anEC2NodeClass is a valid class "default": al2023@latest, subnets and
// security groups by discovery tag, a role.
func anEC2NodeClass() *ec2NodeClassBuilder {
	discovery := map[string]string{"millwright.dev/discovery": "demo"}
	return &ec2NodeClassBuilder{nc: EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: EC2NodeClassSpec{
			SubnetSelectorTerms:        []SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []SecurityGroupSelectorTerm{{Tags: discovery}},
			AMISelectorTerms:           []AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "MillwrightNodeRole-demo",
		},
	}}
}

func (b *ec2NodeClassBuilder) build() *EC2NodeClass { return b.nc.DeepCopy() }

func (b *ec2NodeClassBuilder) with(change func(*EC2NodeClass)) *ec2NodeClassBuilder {
	change(&b.nc)
	return b
}

func (b *ec2NodeClassBuilder) withSubnetTerms(terms ...SubnetSelectorTerm) *ec2NodeClassBuilder {
	b.nc.Spec.SubnetSelectorTerms = terms
	return b
}

func (b *ec2NodeClassBuilder) withSecurityGroupTerms(terms ...SecurityGroupSelectorTerm) *ec2NodeClassBuilder {
	b.nc.Spec.SecurityGroupSelectorTerms = terms
	return b
}

func (b *ec2NodeClassBuilder) withAMITerms(terms ...AMISelectorTerm) *ec2NodeClassBuilder {
	b.nc.Spec.AMISelectorTerms = terms
	return b
}

func (b *ec2NodeClassBuilder) withAMIFamily(family string) *ec2NodeClassBuilder {
	b.nc.Spec.AMIFamily = &family
	return b
}

func (b *ec2NodeClassBuilder) withRole(role string) *ec2NodeClassBuilder {
	b.nc.Spec.Role = role
	return b
}

func (b *ec2NodeClassBuilder) withInstanceProfile(profile string) *ec2NodeClassBuilder {
	b.nc.Spec.InstanceProfile = &profile
	return b
}

func (b *ec2NodeClassBuilder) withTag(key, value string) *ec2NodeClassBuilder {
	if b.nc.Spec.Tags == nil {
		b.nc.Spec.Tags = map[string]string{}
	}
	b.nc.Spec.Tags[key] = value
	return b
}

func (b *ec2NodeClassBuilder) withKubelet(k KubeletConfiguration) *ec2NodeClassBuilder {
	b.nc.Spec.Kubelet = &k
	return b
}

func (b *ec2NodeClassBuilder) withBlockDevice(m BlockDeviceMapping) *ec2NodeClassBuilder {
	b.nc.Spec.BlockDeviceMappings = append(b.nc.Spec.BlockDeviceMappings, m)
	return b
}

func (b *ec2NodeClassBuilder) withMetadataOptions(m MetadataOptions) *ec2NodeClassBuilder {
	b.nc.Spec.MetadataOptions = &m
	return b
}

// rootVolume is a valid root disk of the given size.
func rootVolume(size string) BlockDeviceMapping {
	q := resource.MustParse(size)
	return BlockDeviceMapping{
		DeviceName: new("/dev/xvda"),
		EBS:        &BlockDevice{VolumeSize: &q, VolumeType: new("gp3"), Encrypted: new(true)},
	}
}
