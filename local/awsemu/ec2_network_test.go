package awsemu

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeSubnetsAndSecurityGroups(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ClusterName = "demo" })
	discovery := []ec2types.Filter{{Name: aws.String("tag:millwright.dev/discovery"), Values: []string{"demo"}}}

	subnets, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: discovery})
	if err != nil {
		t.Fatal(err)
	}
	if len(subnets.Subnets) != 3 {
		t.Fatalf("%d subnets, want one per zone", len(subnets.Subnets))
	}
	for _, s := range subnets.Subnets {
		if !strings.HasPrefix(aws.ToString(s.CidrBlock), "10.0.") || aws.ToInt32(s.AvailableIpAddressCount) <= 0 || aws.ToString(s.VpcId) == "" {
			t.Errorf("subnet %+v", s)
		}
	}
	byZone, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1c"}}}})
	if err != nil || len(byZone.Subnets) != 1 || aws.ToString(byZone.Subnets[0].AvailabilityZone) != "us-east-1c" {
		t.Errorf("subnet by zone: %v %+v", err, byZone)
	}
	byID, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{aws.ToString(subnets.Subnets[1].SubnetId)}})
	if err != nil || len(byID.Subnets) != 1 {
		t.Errorf("subnet by id: %v %+v", err, byID)
	}
	_, err = h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-00000000000000000"}})
	if code := apiErrorCode(t, err); code != "InvalidSubnetID.NotFound" {
		t.Errorf("unknown subnet: %q", code)
	}
	none, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("tag:millwright.dev/discovery"), Values: []string{"other"}}}})
	if err != nil || len(none.Subnets) != 0 {
		t.Errorf("other cluster's subnets: %v %+v", err, none)
	}

	groups, err := h.ec2.DescribeSecurityGroups(h.ctx, &ec2.DescribeSecurityGroupsInput{Filters: discovery})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.SecurityGroups) != 1 || aws.ToString(groups.SecurityGroups[0].GroupName) != "demo-node" {
		t.Fatalf("discovered groups %+v", groups.SecurityGroups)
	}
	all, err := h.ec2.DescribeSecurityGroups(h.ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil || len(all.SecurityGroups) != 2 {
		t.Errorf("all groups: %v %d", err, len(all.SecurityGroups))
	}
	_, err = h.ec2.DescribeSecurityGroups(h.ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-00000000000000000"}})
	if code := apiErrorCode(t, err); code != "InvalidGroup.NotFound" {
		t.Errorf("unknown group: %q", code)
	}
}

func TestDescribeImages(t *testing.T) {
	h := newHarness(t)
	names := func(out *ec2.DescribeImagesOutput) []string {
		var n []string
		for _, im := range out.Images {
			n = append(n, aws.ToString(im.Name))
		}
		return n
	}
	tests := []struct {
		name  string
		input *ec2.DescribeImagesInput
		want  []string
	}{
		{name: "name wildcard, owner amazon, current release only", input: &ec2.DescribeImagesInput{
			Owners:  []string{"amazon"},
			Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.37-*"}}},
		}, want: []string{"amazon-eks-node-al2023-x86_64-standard-1.37-v20261101"}},
		{name: "deprecated included on request", input: &ec2.DescribeImagesInput{
			IncludeDeprecated: aws.Bool(true),
			Filters:           []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-arm64-standard-1.37-*"}}},
		}, want: []string{"amazon-eks-node-al2023-arm64-standard-1.37-v20240625", "amazon-eks-node-al2023-arm64-standard-1.37-v20261015", "amazon-eks-node-al2023-arm64-standard-1.37-v20261101"}},
		{name: "every family's current release", input: &ec2.DescribeImagesInput{
			Owners: []string{"amazon"},
			Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{
				"amazon-eks-node-1.37-*", "bottlerocket-aws-k8s-1.37-x86_64-*", "Windows_Server-2022-English-Core-EKS_Optimized-1.37-*",
			}}},
		}, want: []string{"Windows_Server-2022-English-Core-EKS_Optimized-1.37-2026.10.14", "Windows_Server-2022-English-Core-EKS_Optimized-1.37-2026.11.12",
			"amazon-eks-node-1.37-v20261101", "bottlerocket-aws-k8s-1.37-x86_64-v1.49.0-" + hashHex(8, "bottlerocket", "v1.49.0"),
			"bottlerocket-aws-k8s-1.37-x86_64-v1.50.0-" + hashHex(8, "bottlerocket", "v1.50.0")}},
		{name: "windows platform", input: &ec2.DescribeImagesInput{
			Filters: []ec2types.Filter{{Name: aws.String("platform"), Values: []string{"windows"}}, {Name: aws.String("name"), Values: []string{"*2019*"}}},
		}, want: []string{"Windows_Server-2019-English-Core-EKS_Optimized-1.37-2026.10.14", "Windows_Server-2019-English-Core-EKS_Optimized-1.37-2026.11.12"}},
		{name: "architecture and tag filters", input: &ec2.DescribeImagesInput{
			Filters: []ec2types.Filter{
				{Name: aws.String("architecture"), Values: []string{"x86_64"}},
				{Name: aws.String("tag:variant"), Values: []string{"nvidia"}},
			},
		}, want: []string{"amazon-eks-node-al2023-x86_64-nvidia-1.37-v20261101"}},
		{name: "someone else's images", input: &ec2.DescribeImagesInput{Owners: []string{"self"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.ec2.DescribeImages(h.ctx, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			got := names(out)
			sortStrings(got)
			if !equalStrings(got, tc.want) {
				t.Errorf("images %v, want %v", got, tc.want)
			}
			for _, im := range out.Images {
				if aws.ToString(im.ImageOwnerAlias) != "amazon" || im.State != ec2types.ImageStateAvailable || aws.ToString(im.CreationDate) == "" {
					t.Errorf("image %+v", im)
				}
			}
		})
	}
	_, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-00000000000000000"}})
	if code := apiErrorCode(t, err); code != "InvalidAMIID.NotFound" {
		t.Errorf("unknown image: %q", code)
	}
}

func TestLaunchTemplates(t *testing.T) {
	h := newHarness(t)
	data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(h.image("x86_64")), UserData: aws.String(al2023UserData("a=b", "c=d:NoSchedule"))}
	create := func(name, token string, d *ec2types.RequestLaunchTemplateData) (*ec2.CreateLaunchTemplateOutput, error) {
		in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: d,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: sdkTags(map[string]string{"millwright.dev/cluster": "demo"})}}}
		if token != "" {
			in.ClientToken = aws.String(token)
		}
		return h.ec2.CreateLaunchTemplate(h.ctx, in)
	}
	created, err := create("millwright/demo/abc", "tok", data)
	if err != nil {
		t.Fatal(err)
	}
	lt := created.LaunchTemplate
	if !strings.HasPrefix(aws.ToString(lt.LaunchTemplateId), "lt-") || aws.ToInt64(lt.LatestVersionNumber) != 1 || len(lt.Tags) != 1 {
		t.Errorf("created %+v", lt)
	}
	again, err := create("millwright/demo/abc", "tok", data)
	if err != nil || aws.ToString(again.LaunchTemplate.LaunchTemplateId) != aws.ToString(lt.LaunchTemplateId) {
		t.Errorf("same token: %v %+v", err, again)
	}
	_, err = create("millwright/demo/abc", "", data)
	if code := apiErrorCode(t, err); code != "InvalidLaunchTemplateName.AlreadyExistsException" {
		t.Errorf("duplicate name: %q", code)
	}
	_, err = create("millwright/demo/abc", "tok", &ec2types.RequestLaunchTemplateData{ImageId: data.ImageId})
	if code := apiErrorCode(t, err); code != "IdempotentParameterMismatch" {
		t.Errorf("same token, other data: %q", code)
	}
	_, err = create("bad-userdata", "", &ec2types.RequestLaunchTemplateData{ImageId: data.ImageId, UserData: aws.String("not base64!")})
	if code := apiErrorCode(t, err); code != "InvalidUserData.Malformed" {
		t.Errorf("bad userData: %q", code)
	}

	found, err := h.ec2.DescribeLaunchTemplates(h.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"millwright/demo/abc"}})
	if err != nil || len(found.LaunchTemplates) != 1 {
		t.Fatalf("describe by name: %v %+v", err, found)
	}
	byTag, err := h.ec2.DescribeLaunchTemplates(h.ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:millwright.dev/cluster"), Values: []string{"demo"}}}})
	if err != nil || len(byTag.LaunchTemplates) != 1 {
		t.Errorf("describe by tag: %v %+v", err, byTag)
	}
	_, err = h.ec2.DescribeLaunchTemplates(h.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"missing"}})
	if code := apiErrorCode(t, err); code != "InvalidLaunchTemplateName.NotFoundException" {
		t.Errorf("unknown name: %q", code)
	}
	if _, err := h.ec2.DeleteLaunchTemplate(h.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("millwright/demo/abc")}); err != nil {
		t.Fatal(err)
	}
	_, err = h.ec2.DeleteLaunchTemplate(h.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId})
	if code := apiErrorCode(t, err); code != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("deleting twice: %q", code)
	}
}

func TestDescribeLaunchTemplatesPaginator(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 7; i++ {
		h.launchTemplate("lt-"+string(rune('a'+i)), "x86_64", "")
	}
	var got []string
	p := ec2.NewDescribeLaunchTemplatesPaginator(h.ec2, &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(3)})
	for p.HasMorePages() {
		out, err := p.NextPage(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, lt := range out.LaunchTemplates {
			got = append(got, aws.ToString(lt.LaunchTemplateName))
		}
	}
	if !equalStrings(got, []string{"lt-a", "lt-b", "lt-c", "lt-d", "lt-e", "lt-f", "lt-g"}) {
		t.Errorf("templates %v", got)
	}
	// A token from another action is refused.
	_, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{NextToken: aws.String("bm90LWEtdG9rZW4")})
	if code := apiErrorCode(t, err); code != "InvalidPaginationToken" {
		t.Errorf("foreign token: %q", code)
	}
}
