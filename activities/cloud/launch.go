package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/events"
	"github.com/millwright/millwright/activities/userdata"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/scheduling"
)

// Error types this package adds to the contract's (activities/errors.go).
const (
	// InvalidLaunchRequestErrorType: the request itself is unusable (no
	// options, no client token). A workflow bug; not retryable.
	InvalidLaunchRequestErrorType = "InvalidLaunchRequest"
	// LaunchFailedErrorType: CreateFleet launched nothing and no failure was
	// about capacity (e.g. EC2 rejected the launch template). Retrying the
	// same request would replay the same answer, so it is not retryable;
	// the rejected offerings are backed off (UnavailableOfferings.MarkRejected).
	LaunchFailedErrorType = activities.LaunchFailedErrorType
)

// IsLaunchFailed reports whether err is a LaunchFailed error.
func IsLaunchFailed(err error) bool { return activities.IsLaunchFailed(err) }

// IsInvalidLaunchRequest reports whether err is an InvalidLaunchRequest error.
func IsInvalidLaunchRequest(err error) bool {
	return hasApplicationErrorType(err, InvalidLaunchRequestErrorType)
}

// How long Launch waits for a just-launched instance to be visible to
// DescribeInstances (EC2 is eventually consistent).
const (
	instanceVisibleTimeout  = time.Minute
	instanceVisibleMinDelay = time.Second
	instanceVisibleMaxDelay = 5 * time.Second
)

// Launch implements activities.NodeActivities.Launch: resolve the NodeClass,
// build the node's userData, ensure one launch template per AMI, and create
// one instance with an instant EC2 Fleet over the remaining options × the
// class's subnets in the options' zones. Spot is used when any option offers
// it (price-capacity-optimized), on-demand otherwise (lowest-price).
// req.ClientToken makes a retried call return the instance the first call
// created. Offerings EC2 reports out of capacity are remembered in
// Unavailable for activities.UnavailableOfferingTTL.
func (p *Provider) Launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	defer activities.KeepAlive(ctx, p.clock, activities.HeartbeatInterval)()
	resp, err := p.launch(ctx, req)
	return resp, asActivityError(ctx, "launch "+req.NodeClaimName, err)
}

func (p *Provider) launch(ctx context.Context, req activities.LaunchRequest) (activities.LaunchResponse, error) {
	if err := validateLaunchRequest(req); err != nil {
		return activities.LaunchResponse{}, err
	}
	if p.nodeClasses == nil {
		return activities.LaunchResponse{}, fmt.Errorf("cloud provider has no EC2NodeClass reader")
	}
	nc, err := p.nodeClasses.GetEC2NodeClass(ctx, req.NodeClassName)
	if apierrors.IsNotFound(err) {
		return activities.LaunchResponse{}, activities.NewInvalidNodeClassError(req.NodeClassName, "metadata.name", "EC2NodeClass not found")
	}
	if err != nil {
		return activities.LaunchResponse{}, fmt.Errorf("reading EC2NodeClass %q: %w", req.NodeClassName, err)
	}
	resolved, err := p.NodeClasses.Resolve(ctx, nc)
	if err != nil {
		return activities.LaunchResponse{}, err
	}

	capacityType := chooseCapacityType(req.Options)
	plan, err := p.planFleet(ctx, req, resolved, capacityType)
	if err != nil {
		return activities.LaunchResponse{}, err
	}
	userData, err := p.buildUserData(req, resolved, capacityType)
	if err != nil {
		return activities.LaunchResponse{}, err
	}
	templates := make(map[string]string, len(plan.images)) // image id → template name
	for _, image := range plan.images {
		name, err := p.ensureLaunchTemplate(ctx, req, resolved, image, userData)
		if err != nil {
			return activities.LaunchResponse{}, err
		}
		templates[image.ID] = name
	}
	// Templates are per node (userData names the node claim), so they are
	// removed once the fleet call is answered; a retry recreates them and a
	// replayed CreateFleet does not need them.
	defer p.deleteLaunchTemplates(ctx, templates)

	out, err := p.ec2.CreateFleet(ctx, plan.input(req, templates, p.instanceTags(req, resolved)))
	var resp activities.LaunchResponse
	switch {
	case errorCode(err) == errCodeIdempotentParameterMismatch:
		resp, err = p.recoverMismatchedLaunch(ctx, req, plan, err)
	case err != nil:
		return activities.LaunchResponse{}, fmt.Errorf("CreateFleet: %w", err)
	default:
		resp, err = p.launchResult(ctx, req, plan, out)
	}
	if err == nil && resolved.IsWindows() {
		labelWindows(resp.Labels, resolved.AMIFamily)
	}
	return resp, err
}

// labelWindows makes a Windows node's labels say so (the catalog's say
// linux): kubernetes.io/os and its beta alias, and the Windows build.
func labelWindows(labels map[string]string, family string) {
	if labels == nil {
		return
	}
	labels[scheduling.LabelOS] = "windows"
	for _, alias := range scheduling.LabelAliases(scheduling.LabelOS) {
		labels[alias] = "windows"
	}
	labels[corev1.LabelWindowsBuild] = WindowsBuilds[family]
}

func validateLaunchRequest(req activities.LaunchRequest) error {
	problem := ""
	switch {
	case req.Cluster == "":
		problem = "cluster is empty"
	case req.NodeClaimName == "":
		problem = "nodeClaimName is empty"
	case req.NodeClassName == "":
		problem = "nodeClassName is empty"
	case req.ClientToken == "":
		problem = "clientToken is empty"
	case len(req.ClientToken) > 64:
		problem = fmt.Sprintf("clientToken has %d characters; EC2 allows 64", len(req.ClientToken))
	case len(req.Options) == 0:
		problem = "options is empty"
	}
	if problem == "" {
		return nil
	}
	return temporal.NewNonRetryableApplicationError("launch request "+req.NodeClaimName+": "+problem, InvalidLaunchRequestErrorType, nil)
}

// chooseCapacityType is spot when any option offers spot: the planner
// already dropped spot offerings priced above on-demand (catalog's
// PreferSpot), so remaining spot offerings are the cheaper choice. After a
// spot InsufficientCapacity the workflow removes those offerings and the
// next launch falls to on-demand.
func chooseCapacityType(options []activities.InstanceTypeOption) string {
	for _, o := range options {
		for _, off := range o.Offerings {
			if off.CapacityType == activities.CapacityTypeSpot {
				return activities.CapacityTypeSpot
			}
		}
	}
	return activities.CapacityTypeOnDemand
}

// fleetPlan is one CreateFleet call: overrides grouped by AMI.
type fleetPlan struct {
	capacityType string
	// images in the order their first override appears.
	images []Image
	// overrides per image id, in option order (cheapest first).
	overrides map[string][]ec2types.FleetLaunchTemplateOverridesRequest
	// offered lists every offering the call covers (for InsufficientCapacity).
	offered []activities.OfferingKey
	// zoneOfSubnet maps the subnets used to their zone.
	zoneOfSubnet map[string]string
}

func (p *Provider) planFleet(ctx context.Context, req activities.LaunchRequest, resolved *ResolvedNodeClass, capacityType string) (*fleetPlan, error) {
	plan := &fleetPlan{
		capacityType: capacityType,
		overrides:    map[string][]ec2types.FleetLaunchTemplateOverridesRequest{},
		zoneOfSubnet: map[string]string{},
	}
	var noImageArchs, noSubnetZones []string
	seenOffering := map[activities.OfferingKey]bool{}
	options := req.Options
	if len(options) > p.maxInstanceTypes {
		options = options[:p.maxInstanceTypes]
	}
	for _, option := range options {
		spec, ok := p.InstanceTypes.Spec(ctx, option.Name)
		if !ok {
			p.log.Warn("instance type option unknown to EC2 and the catalog; skipped", zap.String("instanceType", option.Name))
			continue
		}
		image, ok := resolved.ImageFor(spec)
		if !ok {
			noImageArchs = appendUnique(noImageArchs, spec.Arch)
			continue
		}
		for _, offering := range option.Offerings {
			if offering.CapacityType != capacityType {
				continue
			}
			key := activities.OfferingKey{InstanceType: option.Name, Zone: offering.Zone, CapacityType: capacityType}
			if seenOffering[key] {
				continue
			}
			subnets := resolved.SubnetsInZone(offering.Zone)
			if len(subnets) == 0 {
				noSubnetZones = appendUnique(noSubnetZones, offering.Zone)
				continue
			}
			seenOffering[key] = true
			plan.offered = append(plan.offered, key)
			if _, ok := plan.overrides[image.ID]; !ok {
				plan.images = append(plan.images, image)
			}
			for _, subnet := range subnets {
				plan.zoneOfSubnet[subnet.ID] = subnet.Zone
				plan.overrides[image.ID] = append(plan.overrides[image.ID], ec2types.FleetLaunchTemplateOverridesRequest{
					InstanceType: ec2types.InstanceType(option.Name),
					SubnetId:     aws.String(subnet.ID),
				})
			}
		}
	}
	if len(plan.offered) > 0 {
		return plan, nil
	}
	if len(noImageArchs) > 0 {
		return nil, activities.NewInvalidNodeClassError(resolved.Name, "spec.amiSelectorTerms",
			fmt.Sprintf("selects no AMI for architecture %s, which every instance type option needs", strings.Join(noImageArchs, ", ")))
	}
	if len(noSubnetZones) > 0 {
		return nil, activities.NewInvalidNodeClassError(resolved.Name, "spec.subnetSelectorTerms",
			fmt.Sprintf("selects no subnet in zone %s, where the instance type options are offered (subnets are in %s)",
				strings.Join(noSubnetZones, ", "), strings.Join(resolved.Zones(), ", ")))
	}
	return nil, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("launch request %s: no option is a known instance type", req.NodeClaimName), InvalidLaunchRequestErrorType, nil)
}

func appendUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// input builds the CreateFleet request. It must be the same for the same
// launch request (EC2 compares a retried ClientToken's parameters), so every
// list in it is in a deterministic order.
func (plan *fleetPlan) input(req activities.LaunchRequest, templates map[string]string, instanceTags map[string]string) *ec2.CreateFleetInput {
	configs := make([]ec2types.FleetLaunchTemplateConfigRequest, 0, len(plan.images))
	for _, image := range plan.images {
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				// By name, not id: a template recreated by a retry has a new
				// id but the same name, so the retried request is identical.
				LaunchTemplateName: aws.String(templates[image.ID]),
				Version:            aws.String("$Latest"),
			},
			Overrides: plan.overrides[image.ID],
		})
	}
	return &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: aws.String(req.ClientToken),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(plan.capacityType),
		},
		SpotOptions: &ec2types.SpotOptionsRequest{
			AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized,
		},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{
			AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice,
		},
		LaunchTemplateConfigs: configs,
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags(instanceTags)},
		},
	}
}

// instanceTags are the tags of the instance: the class's own, then
// Millwright's (which the class may not override).
func (p *Provider) instanceTags(req activities.LaunchRequest, resolved *ResolvedNodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range resolved.Spec.Tags {
		tags[k] = v
	}
	tags[apisv1.TagClusterPrefix+req.Cluster] = "owned"
	tags[TagCluster] = req.Cluster
	tags[apisv1.TagNodePool] = req.NodePool
	tags[apisv1.TagNodeClass] = req.NodeClassName
	tags[apisv1.TagNodeClaim] = req.NodeClaimName
	tags[TagWorkflowID] = req.WorkflowID
	tags[TagName] = req.Cluster + "/" + req.NodeClaimName
	return tags
}

// launchTemplateTags are the launch template's own tags: the class's tags
// (as on the instances and volumes), then Millwright's, which the class may
// not override: the IAM policy lets the worker create and delete only
// templates carrying TagCluster for its cluster, and
// kubernetes.io/cluster/<name>=owned marks it as the cluster's for cost
// tooling.
func (p *Provider) launchTemplateTags(req activities.LaunchRequest, resolved *ResolvedNodeClass) map[string]string {
	tags := maps.Clone(resolved.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[apisv1.TagClusterPrefix+req.Cluster] = "owned"
	tags[TagCluster] = req.Cluster
	tags[apisv1.TagNodeClass] = resolved.Name
	tags[apisv1.TagNodeClaim] = req.NodeClaimName
	return tags
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// NodeLabels are the labels a node launched for req carries from boot: the
// request's labels, its pool, node claim, NodeClass and capacity type, with
// Karpenter's alias keys beside Millwright's so pods written for Karpenter
// schedule on it.
func NodeLabels(req activities.LaunchRequest, capacityType string) map[string]string {
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = v
	}
	labels[scheduling.LabelNodePool] = req.NodePool
	labels[scheduling.LabelNodeClass] = req.NodeClassName
	labels[scheduling.LabelCapacityType] = capacityType
	labels[activities.NodeClaimLabel] = req.NodeClaimName
	return scheduling.WithAliases(labels)
}

// NodeTaints are the taints a node launched for req registers with: its
// taints, its startup taints and the unregistered taint RegisterNode
// removes.
func NodeTaints(req activities.LaunchRequest) []corev1.Taint {
	taints := make([]corev1.Taint, 0, len(req.Taints)+len(req.StartupTaints)+1)
	taints = append(taints, req.Taints...)
	taints = append(taints, req.StartupTaints...)
	return append(taints, corev1.Taint{Key: activities.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute})
}

// buildUserData returns the base64 userData for the class's AMI family,
// the class's own userData merged in as Karpenter merges it (package
// userdata): nodeadm for AL2023, bootstrap.sh for AL2, TOML settings for
// Bottlerocket, the EKS bootstrap PowerShell for Windows; for Custom AMIs
// the class's userData verbatim (the node then joins by itself).
func (p *Provider) buildUserData(req activities.LaunchRequest, resolved *ResolvedNodeClass, capacityType string) (string, error) {
	custom := aws.ToString(resolved.Spec.UserData)
	if resolved.AMIFamily == apisv1.AMIFamilyCustom {
		return base64.StdEncoding.EncodeToString([]byte(custom)), nil
	}
	b := userdata.Bootstrap{
		Cluster: userdata.Cluster{
			Name: p.cluster.Name, APIServerEndpoint: p.cluster.Endpoint,
			CertificateAuthority: p.cluster.CertificateAuthority, ServiceCIDR: p.cluster.ServiceCIDR,
		},
		Labels:     NodeLabels(req, capacityType),
		Taints:     NodeTaints(req),
		ClusterDNS: p.cluster.ClusterDNS,
		Kubelet:    resolved.Spec.Kubelet,
		RAID0:      resolved.Spec.InstanceStorePolicy != nil && *resolved.Spec.InstanceStorePolicy == apisv1.InstanceStorePolicyRAID0,
		Custom:     custom,
	}
	if k := resolved.Spec.Kubelet; k != nil {
		if k.MaxPods != nil {
			b.MaxPods = *k.MaxPods
		}
		if len(k.ClusterDNS) > 0 {
			b.ClusterDNS = k.ClusterDNS
		}
	}
	var encoded string
	var err error
	switch resolved.AMIFamily {
	case apisv1.AMIFamilyAL2:
		encoded, err = userdata.AL2{Bootstrap: b}.BuildBase64()
	case apisv1.AMIFamilyBottlerocket:
		encoded, err = userdata.Bottlerocket{Bootstrap: b}.BuildBase64()
	case apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025:
		encoded, err = userdata.Windows{Bootstrap: b}.BuildBase64()
	default:
		doc := userdata.AL2023{
			Cluster: b.Cluster, Labels: b.Labels, Taints: b.Taints, MaxPods: b.MaxPods,
			ClusterDNS: b.ClusterDNS, RAID0: b.RAID0, Custom: b.Custom,
		}
		applyKubelet(&doc, resolved.Spec.Kubelet)
		encoded, err = doc.BuildBase64()
	}
	if userdata.IsInvalidUserData(err) {
		field := "spec.userData"
		if strings.Contains(err.Error(), "spec.instanceStorePolicy") {
			field = "spec.instanceStorePolicy"
		}
		return "", activities.NewInvalidNodeClassError(resolved.Name, field, err.Error())
	}
	if err != nil {
		return "", fmt.Errorf("building userData: %w", err)
	}
	return encoded, nil
}

// launchTemplateData is the launch template for one AMI of a resolved class.
func (p *Provider) launchTemplateData(req activities.LaunchRequest, resolved *ResolvedNodeClass, image Image, userData string) *ec2types.RequestLaunchTemplateData {
	spec := resolved.Spec
	groupIDs := make([]string, len(resolved.SecurityGroups))
	for i, g := range resolved.SecurityGroups {
		groupIDs[i] = g.ID
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(image.ID),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(resolved.InstanceProfile)},
		BlockDeviceMappings: blockDeviceMappings(resolved.AMIFamily, spec.BlockDeviceMappings),
		MetadataOptions:     metadataOptions(spec.MetadataOptions),
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(p.instanceTags(req, resolved))},
		},
	}
	if userData != "" {
		data.UserData = aws.String(userData)
	}
	if spec.DetailedMonitoring != nil {
		data.Monitoring = &ec2types.LaunchTemplatesMonitoringRequest{Enabled: spec.DetailedMonitoring}
	}
	if spec.AssociatePublicIPAddress != nil {
		// The public-IP choice lives on a network interface, which then
		// carries the security groups too.
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex:              aws.Int32(0),
			AssociatePublicIpAddress: spec.AssociatePublicIPAddress,
			Groups:                   groupIDs,
			DeleteOnTermination:      aws.Bool(true),
		}}
	} else {
		data.SecurityGroupIds = groupIDs
	}
	return data
}

// defaultBlockDevices are a family's disks when the class lists none, as
// Karpenter's: a 20Gi gp3 root volume (the size the catalog's
// ephemeral-storage capacity assumes) on /dev/xvda for AL2023, AL2 and
// Custom; for Bottlerocket a 4Gi OS volume plus the 20Gi data volume
// (/dev/xvdb) the kubelet uses; for Windows a 50Gi /dev/sda1. All
// encrypted.
func defaultBlockDevices(family string) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	volume := func(device string, gib int32) ec2types.LaunchTemplateBlockDeviceMappingRequest {
		return ec2types.LaunchTemplateBlockDeviceMappingRequest{
			DeviceName: aws.String(device),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				VolumeSize: aws.Int32(gib), VolumeType: ec2types.VolumeTypeGp3,
				Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true),
			},
		}
	}
	switch family {
	case apisv1.AMIFamilyBottlerocket:
		return []ec2types.LaunchTemplateBlockDeviceMappingRequest{volume("/dev/xvda", 4), volume("/dev/xvdb", 20)}
	case apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025:
		return []ec2types.LaunchTemplateBlockDeviceMappingRequest{volume("/dev/sda1", 50)}
	}
	return []ec2types.LaunchTemplateBlockDeviceMappingRequest{volume("/dev/xvda", 20)}
}

func blockDeviceMappings(family string, mappings []apisv1.BlockDeviceMapping) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	if len(mappings) == 0 {
		return defaultBlockDevices(family)
	}
	out := make([]ec2types.LaunchTemplateBlockDeviceMappingRequest, 0, len(mappings))
	for _, m := range mappings {
		bdm := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted,
				KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID,
				VolumeType: ec2types.VolumeType(aws.ToString(e.VolumeType)),
			}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeSize != nil {
				// EBS sizes are whole GiB; round up what the user wrote.
				gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
				ebs.VolumeSize = aws.Int32(int32(gib))
			}
			bdm.Ebs = ebs
		}
		out = append(out, bdm)
	}
	return out
}

func metadataOptions(mo *apisv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(apisv1.MetadataEndpointEnabled),
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(apisv1.MetadataEndpointDisabled),
		HttpPutResponseHopLimit: aws.Int32(int32(apisv1.DefaultHopLimit)),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(apisv1.MetadataTokensRequired),
	}
	if mo == nil {
		return out
	}
	if mo.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*mo.HTTPEndpoint)
	}
	if mo.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*mo.HTTPProtocolIPv6)
	}
	if mo.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*mo.HTTPPutResponseHopLimit))
	}
	if mo.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*mo.HTTPTokens)
	}
	return out
}

// launchTemplateNameChars are the characters EC2 allows in a template name.
var launchTemplateNameChars = regexp.MustCompile(`[^a-zA-Z0-9().\-/_]`)

// LaunchTemplateName names the template for given contents:
// millwright/<cluster>/<hash of the contents>. Equal contents give the same
// name, so finding the template by name is finding one with these contents.
func LaunchTemplateName(cluster string, data *ec2types.RequestLaunchTemplateData) (string, error) {
	encoded, err := json.Marshal(data)
	if err != nil {
		return "", fmt.Errorf("encoding launch template data: %w", err)
	}
	sum := sha256.Sum256(encoded)
	prefix := launchTemplateNameChars.ReplaceAllString(cluster, "-")
	if len(prefix) > 60 {
		prefix = prefix[:60]
	}
	return "millwright/" + prefix + "/" + hex.EncodeToString(sum[:])[:40], nil
}

// ensureLaunchTemplate finds the template for this image and userData by
// name, or creates it; a concurrent creation by another attempt is success.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, req activities.LaunchRequest, resolved *ResolvedNodeClass, image Image, userData string) (string, error) {
	data := p.launchTemplateData(req, resolved, image, userData)
	name, err := LaunchTemplateName(req.Cluster, data)
	if err != nil {
		return "", err
	}
	found, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	switch {
	case err == nil && len(found.LaunchTemplates) > 0:
		return name, nil
	case err != nil && !isNotFound(err):
		return "", fmt.Errorf("DescribeLaunchTemplates %s: %w", name, err)
	}
	_, err = p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags:         ec2Tags(p.launchTemplateTags(req, resolved)),
		}},
	})
	if err != nil && errorCode(err) != errCodeTemplateNameExists {
		return "", fmt.Errorf("CreateLaunchTemplate %s: %w", name, err)
	}
	return name, nil
}

func (p *Provider) deleteLaunchTemplates(ctx context.Context, templates map[string]string) {
	for _, name := range templates {
		_, err := p.ec2.DeleteLaunchTemplate(context.WithoutCancel(ctx), &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		if err != nil && !isNotFound(err) {
			p.log.Warn("deleting launch template failed; it is left behind", zap.String("launchTemplate", name), zap.Error(err))
		}
	}
}

// launchResult reads CreateFleet's answer: the instance, or the offerings
// that failed.
func (p *Provider) launchResult(ctx context.Context, req activities.LaunchRequest, plan *fleetPlan, out *ec2.CreateFleetOutput) (activities.LaunchResponse, error) {
	var capacityFailures, otherFailures []string
	rejected := map[activities.OfferingKey]string{} // offering → EC2's error code
	for _, fe := range out.Errors {
		code := aws.ToString(fe.ErrorCode)
		if !unfulfillableCapacityCodes[code] {
			otherFailures = append(otherFailures, code+": "+aws.ToString(fe.ErrorMessage))
			if key, ok := plan.failedOffering(fe); ok {
				rejected[key] = code
			}
			continue
		}
		capacityFailures = append(capacityFailures, code)
		if key, ok := plan.failedOffering(fe); ok {
			p.Unavailable.MarkUnavailable(key, code)
		}
	}
	for _, group := range out.Instances {
		if len(group.InstanceIds) == 0 {
			continue
		}
		return p.describeLaunched(ctx, req, plan, group)
	}
	if len(capacityFailures) > 0 || len(otherFailures) == 0 {
		return activities.LaunchResponse{}, activities.NewInsufficientCapacityError(
			fmt.Sprintf("CreateFleet launched no %s instance for %s: %s", plan.capacityType, req.NodeClaimName, summarize(append(capacityFailures, otherFailures...))),
			plan.offered)
	}
	return activities.LaunchResponse{}, activities.NewLaunchFailedError(
		fmt.Sprintf("CreateFleet launched no instance for %s: %s", req.NodeClaimName, summarize(otherFailures)),
		p.backOffRejected(req, plan, rejected, otherFailures))
}

// backOffRejected backs off the offerings EC2 rejected for a reason other
// than capacity (all offered when the errors name none), so neither this
// worker's planner nor the provisioner (told through the node workflow)
// plans them again at once, and publishes a Warning on the NodePool.
func (p *Provider) backOffRejected(req activities.LaunchRequest, plan *fleetPlan, rejected map[activities.OfferingKey]string, failures []string) []activities.UnavailableOffering {
	if len(rejected) == 0 {
		for _, key := range plan.offered {
			rejected[key] = "unattributed"
		}
	}
	keys := make([]activities.OfferingKey, 0, len(rejected))
	for key := range rejected {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b activities.OfferingKey) int { return strings.Compare(a.String(), b.String()) })
	backedOff := make([]activities.UnavailableOffering, 0, len(keys))
	for _, key := range keys {
		until, backoff := p.Unavailable.MarkRejected(key, rejected[key])
		backedOff = append(backedOff, activities.UnavailableOffering{OfferingKey: key, Until: until})
		p.log.Warn("EC2 rejected the launch; offering backed off", zap.String("nodeClaim", req.NodeClaimName),
			zap.String("offering", key.String()), zap.String("code", rejected[key]), zap.Duration("backoff", backoff))
		p.events.Publish(events.Event{
			InvolvedObject: events.NodePoolRef(req.NodePool, ""),
			Type:           corev1.EventTypeWarning,
			Reason:         events.FailedLaunch,
			Message: fmt.Sprintf("EC2 rejected launching %s (%s): %s; not launched there again for %s",
				key, rejected[key], summarize(failures), backoff),
			DedupeValues: []string{req.NodePool, key.String(), rejected[key]},
		})
	}
	return backedOff
}

// failedOffering is the offering a fleet error is about.
func (plan *fleetPlan) failedOffering(fe ec2types.CreateFleetError) (activities.OfferingKey, bool) {
	lto := fe.LaunchTemplateAndOverrides
	if lto == nil || lto.Overrides == nil {
		return activities.OfferingKey{}, false
	}
	zone := aws.ToString(lto.Overrides.AvailabilityZone)
	if zone == "" {
		zone = plan.zoneOfSubnet[aws.ToString(lto.Overrides.SubnetId)]
	}
	capacityType := string(fe.Lifecycle)
	if capacityType == "" {
		capacityType = plan.capacityType
	}
	if lto.Overrides.InstanceType == "" || zone == "" {
		return activities.OfferingKey{}, false
	}
	return activities.OfferingKey{InstanceType: string(lto.Overrides.InstanceType), Zone: zone, CapacityType: capacityType}, true
}

// summarize lists distinct messages with their counts, for error text.
func summarize(messages []string) string {
	counts := map[string]int{}
	var order []string
	for _, m := range messages {
		if counts[m] == 0 {
			order = append(order, m)
		}
		counts[m]++
	}
	parts := make([]string, len(order))
	for i, m := range order {
		parts[i] = m
		if counts[m] > 1 {
			parts[i] = fmt.Sprintf("%s (×%d)", m, counts[m])
		}
	}
	if len(parts) == 0 {
		return "no errors reported"
	}
	return strings.Join(parts, "; ")
}

// describeLaunched reads the launched instance (waiting out EC2's eventual
// consistency) and builds the response.
func (p *Provider) describeLaunched(ctx context.Context, req activities.LaunchRequest, plan *fleetPlan, group ec2types.CreateFleetInstance) (activities.LaunchResponse, error) {
	id := group.InstanceIds[0]
	capacityType := string(group.Lifecycle)
	if capacityType == "" {
		capacityType = plan.capacityType
	}
	instance, err := p.describeInstance(ctx, id)
	if err != nil {
		return activities.LaunchResponse{}, err
	}
	return p.launchResponse(ctx, req, instance, capacityType), nil
}

func (p *Provider) describeInstance(ctx context.Context, id string) (ec2types.Instance, error) {
	waiter := ec2.NewInstanceExistsWaiter(p.ec2, func(o *ec2.InstanceExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = instanceVisibleMinDelay, instanceVisibleMaxDelay
	})
	out, err := waiter.WaitForOutput(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, instanceVisibleTimeout)
	if err != nil {
		return ec2types.Instance{}, fmt.Errorf("DescribeInstances %s after launch: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if aws.ToString(inst.InstanceId) == id {
				return inst, nil
			}
		}
	}
	return ec2types.Instance{}, fmt.Errorf("DescribeInstances %s after launch: instance missing from the answer", id)
}

func (p *Provider) launchResponse(ctx context.Context, req activities.LaunchRequest, inst ec2types.Instance, capacityType string) activities.LaunchResponse {
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = activities.CapacityTypeSpot
	}
	instanceType := string(inst.InstanceType)
	resp := activities.LaunchResponse{
		InstanceID:     aws.ToString(inst.InstanceId),
		InstanceType:   instanceType,
		Zone:           zone,
		CapacityType:   capacityType,
		PricePerHour:   offeringPrice(req.Options, instanceType, zone, capacityType),
		Hostname:       aws.ToString(inst.PrivateDnsName),
		PrivateDNSName: aws.ToString(inst.PrivateDnsName),
		ProviderID:     ProviderID(zone, aws.ToString(inst.InstanceId)),
		ImageID:        aws.ToString(inst.ImageId),
		SubnetID:       aws.ToString(inst.SubnetId),
		LaunchTime:     aws.ToTime(inst.LaunchTime),
		Labels:         p.offeringLabels(ctx, instanceType, capacityType),
	}
	for _, g := range inst.SecurityGroups {
		if id := aws.ToString(g.GroupId); id != "" {
			resp.SecurityGroupIDs = append(resp.SecurityGroupIDs, id)
		}
	}
	slices.Sort(resp.SecurityGroupIDs)
	p.log.Info(fmt.Sprintf("Launched instance: %s, type: %s, zone: %s, hostname: %s", resp.InstanceID, resp.InstanceType, resp.Zone, resp.Hostname),
		zap.String("nodeClaim", req.NodeClaimName), zap.String("capacityType", resp.CapacityType),
		zap.Float64("pricePerHour", resp.PricePerHour), zap.String("providerID", resp.ProviderID))
	return resp
}

// offeringLabels are the labels a node of instanceType and capacityType
// carries: the type's well-known labels and the capacity type, each also
// under its aliases (Karpenter's keys, the beta Kubernetes keys) so that pods
// written against those keys schedule on the node the packer chose for them.
// An instance type missing from the catalog gets the capacity type only.
func (p *Provider) offeringLabels(ctx context.Context, instanceType, capacityType string) map[string]string {
	labels := map[string]string{scheduling.LabelCapacityType: capacityType}
	if p.InstanceTypes != nil {
		if spec, ok := p.InstanceTypes.Spec(ctx, instanceType); ok {
			maps.Copy(labels, spec.Labels())
		}
	}
	for key, value := range maps.Clone(labels) {
		for _, alias := range scheduling.LabelAliases(key) {
			labels[alias] = value
		}
	}
	return labels
}

// ProviderID is the Kubernetes provider ID of an EC2 instance.
func ProviderID(zone, instanceID string) string {
	return "aws:///" + zone + "/" + instanceID
}

func offeringPrice(options []activities.InstanceTypeOption, instanceType, zone, capacityType string) float64 {
	for _, o := range options {
		if o.Name != instanceType {
			continue
		}
		for _, off := range o.Offerings {
			if off.Zone == zone && off.CapacityType == capacityType {
				return off.PricePerHour
			}
		}
	}
	return 0
}

// recoverMismatchedLaunch handles a ClientToken EC2 has seen with other
// parameters: the same launch retried after its inputs moved (a newer AMI
// was released, the NodeClass changed). The instance the first call
// launched is found by its node-claim tag; if there is none, the first call
// launched nothing, and the token can never launch now, so the offerings
// are reported as without capacity for the workflow to move on.
func (p *Provider) recoverMismatchedLaunch(ctx context.Context, req activities.LaunchRequest, plan *fleetPlan, cause error) (activities.LaunchResponse, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{req.Cluster}},
		{Name: aws.String("tag:" + apisv1.TagNodeClaim), Values: []string{req.NodeClaimName}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return activities.LaunchResponse{}, fmt.Errorf("looking up the instance of %s after %v: %w", req.NodeClaimName, cause, err)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			p.log.Info("CreateFleet ClientToken reused with changed parameters; adopting the instance the first call launched",
				zap.String("nodeClaim", req.NodeClaimName), zap.String("instance", aws.ToString(inst.InstanceId)))
			capacityType := activities.CapacityTypeOnDemand
			if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
				capacityType = activities.CapacityTypeSpot
			}
			return p.launchResponse(ctx, req, inst, capacityType), nil
		}
	}
	return activities.LaunchResponse{}, activities.NewInsufficientCapacityError(
		fmt.Sprintf("CreateFleet for %s: client token already used with other parameters and no instance was launched with it (%v)", req.NodeClaimName, cause),
		plan.offered)
}
