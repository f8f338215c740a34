package v1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/millwright/millwright/deploy/crds"
)

type malformedEC2NodeClass struct {
	name   string
	class  *EC2NodeClass
	field  string
	detail string
}

const (
	subnets = "spec.subnetSelectorTerms"
	sgs     = "spec.securityGroupSelectorTerms"
	amis    = "spec.amiSelectorTerms"
	kubelet = "spec.kubelet"
	bdm     = "spec.blockDeviceMappings"
)

func malformedEC2NodeClasses() []malformedEC2NodeClass {
	byTag := map[string]string{"millwright.dev/discovery": "demo"}
	size := resource.MustParse("100Ti")
	return []malformedEC2NodeClass{
		// subnets and security groups
		{name: "no subnet terms", class: anEC2NodeClass().withSubnetTerms().build(),
			field: subnets, detail: "Required value"},
		{name: "empty subnet term", class: anEC2NodeClass().withSubnetTerms(SubnetSelectorTerm{}).build(),
			field: subnets + "[0]", detail: "expected at least one, got none, ['tags', 'id']"},
		{name: "subnet id with tags", class: anEC2NodeClass().withSubnetTerms(SubnetSelectorTerm{ID: "subnet-0abc", Tags: byTag}).build(),
			field: subnets + "[0]", detail: "'id' is mutually exclusive"},
		{name: "subnet id malformed", class: anEC2NodeClass().withSubnetTerms(SubnetSelectorTerm{ID: "subnet_0abc"}).build(),
			field: subnets + "[0].id", detail: "subnet-0123abcd"},
		{name: "subnet tag with empty value", class: anEC2NodeClass().withSubnetTerms(SubnetSelectorTerm{Tags: map[string]string{"Name": ""}}).build(),
			field: subnets + "[0].tags[Name]", detail: "empty tag keys or values aren't supported"},
		{name: "security group id with name", class: anEC2NodeClass().withSecurityGroupTerms(SecurityGroupSelectorTerm{ID: "sg-0abc", Name: "nodes"}).build(),
			field: sgs + "[0]", detail: "mutually exclusive"},
		{name: "security group id malformed", class: anEC2NodeClass().withSecurityGroupTerms(SecurityGroupSelectorTerm{ID: "0abc"}).build(),
			field: sgs + "[0].id", detail: "sg-0123abcd"},

		// AMIs
		{name: "no AMI terms", class: anEC2NodeClass().withAMITerms().build(),
			field: amis, detail: "Required value"},
		{name: "alias with another term", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "al2023@latest"}, AMISelectorTerm{ID: "ami-0abc"}).build(),
			field: amis, detail: "cannot be set with a combination of other amiSelectorTerms"},
		{name: "alias with tags in one term", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "al2023@latest", Tags: byTag}).build(),
			field: amis + "[0]", detail: "'alias' is mutually exclusive"},
		{name: "id with name in one term", class: anEC2NodeClass().withAMIFamily(AMIFamilyAL2023).withAMITerms(AMISelectorTerm{ID: "ami-0abc", Name: "my-ami"}).build(),
			field: amis + "[0]", detail: "'id' is mutually exclusive"},
		{name: "alias without version", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "al2023"}).build(),
			field: amis + "[0].alias", detail: "must match the format 'family@version'"},
		{name: "alias of an unknown family", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "ubuntu@latest"}).build(),
			field: amis + "[0].alias", detail: `Unsupported value: "ubuntu"`},
		{name: "windows alias pinned to a version that is no date", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "windows2022@v1.2.3"}).build(),
			field: amis + "[0].alias", detail: "windows versions must be 'latest' or a release date 'vYYYYMMDD'"},
		{name: "owner alone", class: anEC2NodeClass().withAMIFamily(AMIFamilyAL2023).withAMITerms(AMISelectorTerm{Owner: "amazon"}).build(),
			field: amis + "[0]", detail: "expected at least one, got none"},
		{name: "no alias and no amiFamily", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Name: "my-ami-*", Owner: "self"}).build(),
			field: "spec.amiFamily", detail: "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		{name: "amiFamily differs from the alias", class: anEC2NodeClass().withAMIFamily(AMIFamilyBottlerocket).build(),
			field: "spec.amiFamily", detail: "must be 'Custom' or the family of the alias (\"al2023\")"},
		{name: "amiFamily unknown", class: anEC2NodeClass().withAMIFamily("Ubuntu").build(),
			field: "spec.amiFamily", detail: `Unsupported value: "Ubuntu"`},

		// identity
		{name: "role and instance profile", class: anEC2NodeClass().withInstanceProfile("nodes").build(),
			field: "spec", detail: "must specify exactly one of ['role', 'instanceProfile']"},
		{name: "neither role nor instance profile", class: anEC2NodeClass().withRole("").build(),
			field: "spec", detail: "must specify exactly one of ['role', 'instanceProfile']"},
		{name: "empty instance profile", class: anEC2NodeClass().withRole("").withInstanceProfile("").build(),
			field: "spec.instanceProfile", detail: "instanceProfile cannot be empty"},

		// tags
		{name: "cluster ownership tag", class: anEC2NodeClass().withTag("kubernetes.io/cluster/demo", "owned").build(),
			field: "spec.tags[kubernetes.io/cluster/demo]", detail: "restricted tag matching kubernetes.io/cluster/"},
		{name: "nodepool tag", class: anEC2NodeClass().withTag(TagNodePool, "default").build(),
			field: "spec.tags[millwright.dev/nodepool]", detail: "restricted tag"},
		{name: "nodeclaim tag", class: anEC2NodeClass().withTag(TagNodeClaim, "x").build(),
			field: "spec.tags[millwright.dev/nodeclaim]", detail: "restricted tag"},
		{name: "aws: tag", class: anEC2NodeClass().withTag("aws:cloudformation:stack-name", "x").build(),
			field: "spec.tags[aws:cloudformation:stack-name]", detail: "reserved by AWS"},
		{name: "tag value too long", class: anEC2NodeClass().withTag("team", strings.Repeat("v", 257)).build(),
			field: "spec.tags[team]", detail: "values at most 256"},

		// metadata options
		{name: "IMDS tokens unknown", class: anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPTokens: new("sometimes")}).build(),
			field: "spec.metadataOptions.httpTokens", detail: `Unsupported value: "sometimes"`},
		{name: "IMDS hop limit above 64", class: anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPPutResponseHopLimit: new(int64(65))}).build(),
			field: "spec.metadataOptions.httpPutResponseHopLimit", detail: "between 1 and 64"},

		// block devices
		{name: "rootVolume", class: anEC2NodeClass().withBlockDevice(rootVolume("20Gi")).with(func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[0].RootVolume = true }).build(),
			field: bdm + "[0].rootVolume", detail: "rootVolume is not supported"},
		{name: "EBS volume without size or snapshot", class: anEC2NodeClass().withBlockDevice(BlockDeviceMapping{DeviceName: new("/dev/xvdb"), EBS: &BlockDevice{VolumeType: new("gp3")}}).build(),
			field: bdm + "[0].ebs", detail: "snapshotID or volumeSize must be defined"},
		{name: "EBS volume above 64Ti", class: anEC2NodeClass().withBlockDevice(BlockDeviceMapping{EBS: &BlockDevice{VolumeSize: &size}}).build(),
			field: bdm + "[0].ebs.volumeSize", detail: "at most 64Ti"},
		{name: "EBS volume size in MiB", class: anEC2NodeClass().withBlockDevice(rootVolume("512Mi")).build(),
			field: bdm + "[0].ebs.volumeSize", detail: "whole number of Gi, G, Ti or T"},
		{name: "EBS volume type unknown", class: anEC2NodeClass().withBlockDevice(BlockDeviceMapping{EBS: &BlockDevice{SnapshotID: new("snap-0abc"), VolumeType: new("gp9")}}).build(),
			field: bdm + "[0].ebs.volumeType", detail: `Unsupported value: "gp9"`},

		// kubelet
		{name: "kubeReserved of an unknown resource", class: anEC2NodeClass().withKubelet(KubeletConfiguration{KubeReserved: map[string]string{"nvidia.com/gpu": "1"}}).build(),
			field: kubelet + ".kubeReserved[nvidia.com/gpu]", detail: `Unsupported value: "nvidia.com/gpu"`},
		{name: "systemReserved negative", class: anEC2NodeClass().withKubelet(KubeletConfiguration{SystemReserved: map[string]string{"memory": "-100Mi"}}).build(),
			field: kubelet + ".systemReserved[memory]", detail: "non-negative resource quantity"},
		{name: "evictionHard on an unknown signal", class: anEC2NodeClass().withKubelet(KubeletConfiguration{EvictionHard: map[string]string{"memory.free": "100Mi"}}).build(),
			field: kubelet + ".evictionHard[memory.free]", detail: `Unsupported value: "memory.free"`},
		{name: "evictionHard not a quantity", class: anEC2NodeClass().withKubelet(KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "a lot"}}).build(),
			field: kubelet + ".evictionHard[memory.available]", detail: "percentage"},
		{name: "evictionSoft without grace period", class: anEC2NodeClass().withKubelet(KubeletConfiguration{EvictionSoft: map[string]string{"memory.available": "10%"}}).build(),
			field: kubelet + ".evictionSoft[memory.available]", detail: "does not have a matching evictionSoftGracePeriod"},
		{name: "image GC thresholds inverted", class: anEC2NodeClass().withKubelet(KubeletConfiguration{ImageGCHighThresholdPercent: new(int32(50)), ImageGCLowThresholdPercent: new(int32(60))}).build(),
			field: kubelet + ".imageGCHighThresholdPercent", detail: "must be greater than imageGCLowThresholdPercent"},
		{name: "maxPods negative", class: anEC2NodeClass().withKubelet(KubeletConfiguration{MaxPods: new(int32(-1))}).build(),
			field: kubelet + ".maxPods", detail: "greater than or equal to 0"},
	}
}

func validEC2NodeClasses() map[string]*EC2NodeClass {
	snapshot := "snap-0abc"
	return map[string]*EC2NodeClass{
		"minimal": anEC2NodeClass().build(),
		"every field set": anEC2NodeClass().
			withSubnetTerms(SubnetSelectorTerm{Tags: map[string]string{"millwright.dev/discovery": "demo", "tier": "*"}}, SubnetSelectorTerm{ID: "subnet-0abc123"}).
			withSecurityGroupTerms(SecurityGroupSelectorTerm{ID: "sg-0abc"}, SecurityGroupSelectorTerm{Name: "nodes"}, SecurityGroupSelectorTerm{Tags: map[string]string{"role": "node"}}).
			withAMITerms(AMISelectorTerm{Alias: "al2023@v20240807"}).withAMIFamily(AMIFamilyAL2023).
			withRole("").withInstanceProfile("MillwrightNodes").
			withTag("team", "payments").withTag("Name", "millwright-node").
			withKubelet(KubeletConfiguration{
				ClusterDNS: []string{"10.100.0.10"}, MaxPods: new(int32(110)), PodsPerCore: new(int32(10)),
				SystemReserved: map[string]string{"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "1000"},
				KubeReserved:   map[string]string{"cpu": "200m", "memory": "1Gi"},
				EvictionHard:   map[string]string{"memory.available": "5%", "nodefs.available": "10%", "imagefs.available": "2Gi"},
				EvictionSoft:   map[string]string{"memory.available": "500Mi"}, EvictionSoftGracePeriod: map[string]Duration{"memory.available": "1m30s"},
				EvictionMaxPodGracePeriod: new(int32(60)), ImageGCHighThresholdPercent: new(int32(85)), ImageGCLowThresholdPercent: new(int32(80)), CPUCFSQuota: new(true),
			}).
			withBlockDevice(rootVolume("100Gi")).
			withBlockDevice(BlockDeviceMapping{DeviceName: new("/dev/xvdb"), EBS: &BlockDevice{SnapshotID: &snapshot, VolumeType: new("io2"), IOPS: new(int64(4000)), DeleteOnTermination: new(true), KMSKeyID: new("alias/nodes")}}).
			withMetadataOptions(MetadataOptions{HTTPEndpoint: new("enabled"), HTTPProtocolIPv6: new("enabled"), HTTPPutResponseHopLimit: new(int64(2)), HTTPTokens: new("optional")}).
			with(func(nc *EC2NodeClass) {
				nc.Spec.UserData = new("#!/bin/bash\necho hello\n")
				nc.Spec.InstanceStorePolicy = new(InstanceStorePolicyRAID0)
				nc.Spec.AssociatePublicIPAddress = new(false)
				nc.Spec.DetailedMonitoring = new(true)
			}).build(),
		"custom family with an alias": anEC2NodeClass().withAMIFamily(AMIFamilyCustom).build(),
		"AMIs by name and owner":      anEC2NodeClass().withAMIFamily(AMIFamilyAL2).withAMITerms(AMISelectorTerm{Name: "amazon-eks-node-*", Owner: "amazon"}, AMISelectorTerm{ID: "ami-0123"}).build(),
		"bottlerocket alias":          anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "bottlerocket@v1.20.0"}).withAMIFamily(AMIFamilyBottlerocket).build(),
		"64Ti volume":                 anEC2NodeClass().withBlockDevice(rootVolume("64Ti")).build(),
		"windows alias pinned":        anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "windows2022@v20250613"}).build(),
	}
}

func TestEC2NodeClassValidateRejectsMalformed(t *testing.T) {
	for _, tc := range malformedEC2NodeClasses() {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.class.Validate()
			ve, ok := AsValidationError(err)
			if !ok {
				t.Fatalf("Validate() = %v, want a *ValidationError", err)
			}
			if ve.Kind != "EC2NodeClass" || ve.Name != tc.class.Name {
				t.Errorf("error is about %s %q", ve.Kind, ve.Name)
			}
			if !hasFieldError(ve.Errors, tc.field, tc.detail) {
				t.Errorf("no error at %s containing %q; got:\n%s", tc.field, tc.detail, describe(ve.Errors))
			}
			if !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("message does not name %s:\n%s", tc.field, err)
			}
		})
	}
}

func TestEC2NodeClassValidateAcceptsValid(t *testing.T) {
	for name, nc := range validEC2NodeClasses() {
		t.Run(name, func(t *testing.T) {
			if err := nc.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestEC2NodeClassCRDAgreesWithValidate(t *testing.T) {
	server := newAPIServerSim(t, crds.EC2NodeClassFile)
	for _, tc := range malformedEC2NodeClasses() {
		t.Run(tc.name, func(t *testing.T) {
			goErrs := tc.class.ValidationErrors()
			serverErrs := server.create(t, tc.class)
			t.Logf("Go:\n%sAPI server:\n%s", describe(goErrs), describe(serverErrs))
			assertErrorsAgree(t, goErrs, serverErrs)
			if !anyPathAgrees(serverErrs, tc.field) {
				t.Errorf("API server reports nothing at %s:\n%s", tc.field, describe(serverErrs))
			}
		})
	}
	for name, nc := range validEC2NodeClasses() {
		t.Run("valid/"+name, func(t *testing.T) {
			if errs := server.create(t, nc); len(errs) > 0 {
				t.Errorf("API server rejects a valid EC2NodeClass:\n%s", describe(errs))
			}
		})
	}
}
