package awsemu

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

func (h *harness) ssmClient() *ssm.Client {
	return ssm.NewFromConfig(sdkConfig(), func(o *ssm.Options) { o.BaseEndpoint = aws.String(h.server.URL) })
}

func (h *harness) iamClient() *iam.Client {
	return iam.NewFromConfig(sdkConfig(), func(o *iam.Options) { o.BaseEndpoint = aws.String(h.server.URL) })
}

func TestSSMPublicAMIParameters(t *testing.T) {
	h := newHarness(t)
	client := h.ssmClient()
	tests := []struct {
		parameter, wantImage string
	}{
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id", "amazon-eks-node-al2023-x86_64-standard-1.37-v20261101"},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.37-v20240625/image_id", "amazon-eks-node-al2023-arm64-standard-1.37-v20240625"},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-1.37-v20261101"},
		{"/aws/service/bottlerocket/aws-k8s-1.37/x86_64/1.20.3/image_id", "bottlerocket-aws-k8s-1.37-x86_64-v1.20.3-" + hashHex(8, "bottlerocket", "v1.20.3")},
		{"/aws/service/bottlerocket/aws-k8s-1.37-nvidia/arm64/latest/image_id", "bottlerocket-aws-k8s-1.37-nvidia-arm64-v1.50.0-" + hashHex(8, "bottlerocket", "v1.50.0")},
		{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.37/image_id", "Windows_Server-2025-English-Core-EKS_Optimized-1.37-2026.11.12"},
		{"arn:aws:ssm:us-east-1::parameter/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.37/image_id", "Windows_Server-2019-English-Core-EKS_Optimized-1.37-2026.11.12"},
	}
	for _, tc := range tests {
		t.Run(tc.wantImage, func(t *testing.T) {
			out, err := client.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(tc.parameter)})
			if err != nil {
				t.Fatal(err)
			}
			images, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(images.Images) != 1 || aws.ToString(images.Images[0].Name) != tc.wantImage {
				t.Errorf("parameter %s names %v, want %s", tc.parameter, images.Images, tc.wantImage)
			}
			if aws.ToString(out.Parameter.DataType) != "aws:ec2:image" || out.Parameter.Type != ssmtypes.ParameterTypeString {
				t.Errorf("parameter %+v", out.Parameter)
			}
		})
	}
	_, err := client.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/nope")})
	var notFound *ssmtypes.ParameterNotFound
	if !errors.As(err, &notFound) {
		t.Errorf("unknown parameter: %v, want ParameterNotFound", err)
	}
	batch, err := client.GetParameters(h.ctx, &ssm.GetParametersInput{Names: []string{tests[0].parameter, "/aws/service/nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Parameters) != 1 || len(batch.InvalidParameters) != 1 || batch.InvalidParameters[0] != "/aws/service/nope" {
		t.Errorf("GetParameters: %+v", batch)
	}
}

func TestIAMInstanceProfileLifecycle(t *testing.T) {
	h := newHarness(t)
	client := h.iamClient()
	name, role := "millwright_123", "MillwrightNodeRole-millwright"
	created, err := client.CreateInstanceProfile(h.ctx, &iam.CreateInstanceProfileInput{
		InstanceProfileName: aws.String(name), Path: aws.String("/millwright/"),
		Tags: []iamtypes.Tag{{Key: aws.String("millwright.dev/cluster"), Value: aws.String("millwright")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(created.InstanceProfile.Arn); got != "arn:aws:iam::123456789012:instance-profile/millwright/"+name {
		t.Errorf("ARN %s", got)
	}
	_, err = client.CreateInstanceProfile(h.ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var exists *iamtypes.EntityAlreadyExistsException
	if !errors.As(err, &exists) {
		t.Errorf("second create: %v, want EntityAlreadyExists", err)
	}
	_, err = client.AddRoleToInstanceProfile(h.ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("NoSuchRole")})
	var noSuch *iamtypes.NoSuchEntityException
	if !errors.As(err, &noSuch) {
		t.Errorf("unknown role: %v, want NoSuchEntity", err)
	}
	if _, err := client.AddRoleToInstanceProfile(h.ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.TagInstanceProfile(h.ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name),
		Tags: []iamtypes.Tag{{Key: aws.String("extra"), Value: aws.String("yes")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := client.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != role || len(got.InstanceProfile.Tags) != 2 {
		t.Errorf("profile %+v", got.InstanceProfile)
	}
	listed, err := client.ListInstanceProfiles(h.ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/millwright/")})
	if err != nil || len(listed.InstanceProfiles) != 1 {
		t.Errorf("ListInstanceProfiles: %v, %v", listed, err)
	}
	_, err = client.DeleteInstanceProfile(h.ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var conflict *iamtypes.DeleteConflictException
	if !errors.As(err, &conflict) {
		t.Errorf("delete with a role: %v, want DeleteConflict", err)
	}
	if _, err := client.RemoveRoleFromInstanceProfile(h.ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteInstanceProfile(h.ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	_, err = client.GetInstanceProfile(h.ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if !errors.As(err, &noSuch) {
		t.Errorf("get after delete: %v, want NoSuchEntity", err)
	}
	if st := h.emu.State(); len(st.InstanceProfiles) != 0 {
		t.Errorf("state still lists %v", st.InstanceProfiles)
	}
}

// A published release (the admin API) becomes what family@latest and the
// "latest" SSM parameter name; the previous release keeps its own
// parameter and is deprecated a month later.
func TestPublishedImageReleaseBecomesLatest(t *testing.T) {
	h := newHarness(t)
	client := h.ssmClient()
	latest := "/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id"
	imageOf := func(parameter string) string {
		t.Helper()
		out, err := client.GetParameter(h.ctx, &ssm.GetParameterInput{Name: aws.String(parameter)})
		if err != nil {
			t.Fatalf("%s: %v", parameter, err)
		}
		images, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})
		if err != nil || len(images.Images) != 1 {
			t.Fatalf("image of %s: %v %v", parameter, images, err)
		}
		return aws.ToString(images.Images[0].Name)
	}
	before := imageOf(latest)

	result, err := h.admin.PublishImageRelease(h.ctx, ImageRelease{Family: "bottlerocket", Version: "v1.51.0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.ImageIDs) != 4 {
		t.Errorf("published %v, want one image per Bottlerocket variant (4)", result.ImageIDs)
	}
	want := "bottlerocket-aws-k8s-1.37-x86_64-v1.51.0-" + hashHex(8, "bottlerocket", "v1.51.0")
	if got := imageOf(latest); got != want {
		t.Errorf("latest names %s, want the new release %s", got, want)
	}
	if got := imageOf("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/1.50.0/image_id"); got != before {
		t.Errorf("the previous release's own parameter names %s, want %s", got, before)
	}
	images, err := h.ec2.DescribeImages(h.ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{before}}}})
	if err != nil || len(images.Images) != 1 || aws.ToString(images.Images[0].DeprecationTime) == "" {
		t.Errorf("previous release %v %v: want it still listed, with a deprecation time", images, err)
	}
	for _, bad := range []ImageRelease{{Family: "bottlerocket", Version: "v1.51.0"}, {Family: "debian", Version: "v1"}, {Family: "al2023"}} {
		if _, err := h.admin.PublishImageRelease(h.ctx, bad); err == nil {
			t.Errorf("release %+v accepted", bad)
		}
	}
}
