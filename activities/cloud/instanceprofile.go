package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"go.uber.org/zap"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// TagRegion is put on managed instance profiles (IAM is global; the tag
// and the path say which region's cluster owns one).
const TagRegion = "topology.kubernetes.io/region"

// InstanceProfileManager creates, tags and deletes the instance profile
// of every EC2NodeClass that names a role, as Karpenter does: one profile
// per class, named <cluster>_<hash of region and class>, under the path
// /millwright/<region>/<cluster>/ (which the worker's IAM policy is scoped
// to), tagged for the cluster, its region and the class, holding the
// class's role. A changed role replaces the profile's role. Profiles of
// deleted classes are removed by GarbageCollect once no instance launched
// for the class is left. Safe for concurrent use; every call is
// idempotent.
type InstanceProfileManager struct {
	iam     IAMAPI
	ec2     EC2API
	cluster string
	region  string
	log     *zap.Logger

	mu sync.Mutex
	// ready maps a profile name to the role it was last seen holding with
	// its tags complete, so a resolution does not call IAM every time.
	ready map[string]string
}

// NewInstanceProfileManager manages the profiles of cluster's classes in
// region.
func NewInstanceProfileManager(iamClient IAMAPI, ec2Client EC2API, cluster, region string, logger *zap.Logger) *InstanceProfileManager {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &InstanceProfileManager{iam: iamClient, ec2: ec2Client, cluster: cluster, region: region,
		log: logger.Named("instanceprofile"), ready: map[string]string{}}
}

// Path is the IAM path of the cluster's managed profiles.
func (m *InstanceProfileManager) Path() string {
	return "/millwright/" + m.region + "/" + m.cluster + "/"
}

// Name is the managed profile's name for class: IAM allows 128
// characters, so the cluster name is cut and the rest is a hash.
func (m *InstanceProfileManager) Name(class string) string {
	sum := sha256.Sum256([]byte(m.region + "/" + m.cluster + "/" + class))
	prefix := m.cluster
	if len(prefix) > 80 {
		prefix = prefix[:80]
	}
	return prefix + "_" + hex.EncodeToString(sum[:])[:20]
}

func (m *InstanceProfileManager) tags(class string) map[string]string {
	return map[string]string{
		apisv1.TagClusterPrefix + m.cluster: "owned",
		TagCluster:                          m.cluster,
		apisv1.TagNodeClass:                 class,
		TagRegion:                           m.region,
	}
}

func iamTags(tags map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(tags))
	for _, t := range ec2Tags(tags) {
		out = append(out, iamtypes.Tag{Key: t.Key, Value: t.Value})
	}
	return out
}

// roleName is the role's name; spec.role may be an ARN
// (arn:aws:iam::123:role/path/name).
func roleName(role string) string { return role[strings.LastIndex(role, "/")+1:] }

// Ensure makes nc's profile exist with its tags and nc's role, and returns
// its name. A role IAM does not know is an InvalidNodeClass error naming
// spec.role.
func (m *InstanceProfileManager) Ensure(ctx context.Context, nc *apisv1.EC2NodeClass) (string, error) {
	name, role := m.Name(nc.Name), roleName(nc.Spec.Role)
	m.mu.Lock()
	done := m.ready[name] == role
	m.mu.Unlock()
	if done {
		return name, nil
	}
	want := m.tags(nc.Name)
	var profile *iamtypes.InstanceProfile
	got, err := m.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	switch {
	case err == nil:
		profile = got.InstanceProfile
		if missing := missingTags(profile.Tags, want); len(missing) > 0 {
			if _, err := m.iam.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(missing)}); err != nil {
				return "", fmt.Errorf("EC2NodeClass %q: tagging instance profile %s: %w", nc.Name, name, err)
			}
		}
	case errorCode(err) == "NoSuchEntity":
		created, err := m.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name), Path: aws.String(m.Path()), Tags: iamTags(want),
		})
		if errorCode(err) == "EntityAlreadyExists" {
			// Another worker created it a moment ago; the next resolution
			// finds it and completes it.
			return "", fmt.Errorf("EC2NodeClass %q: instance profile %s is being created concurrently: %w", nc.Name, name, err)
		}
		if err != nil {
			return "", fmt.Errorf("EC2NodeClass %q: creating instance profile %s: %w", nc.Name, name, err)
		}
		profile = created.InstanceProfile
		m.log.Info("Created instance profile", zap.String("instanceProfile", name), zap.String("ec2NodeClass", nc.Name), zap.String("role", role))
	default:
		return "", fmt.Errorf("EC2NodeClass %q: reading instance profile %s: %w", nc.Name, name, err)
	}
	if err := m.ensureRole(ctx, nc, profile, role); err != nil {
		return "", err
	}
	m.mu.Lock()
	m.ready[name] = role
	m.mu.Unlock()
	return name, nil
}

func missingTags(have []iamtypes.Tag, want map[string]string) map[string]string {
	missing := map[string]string{}
	for k, v := range want {
		missing[k] = v
	}
	for _, t := range have {
		if missing[aws.ToString(t.Key)] == aws.ToString(t.Value) {
			delete(missing, aws.ToString(t.Key))
		}
	}
	return missing
}

func (m *InstanceProfileManager) ensureRole(ctx context.Context, nc *apisv1.EC2NodeClass, profile *iamtypes.InstanceProfile, role string) error {
	name := aws.ToString(profile.InstanceProfileName)
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			return nil
		}
		// A profile holds one role: the class's role changed.
		if _, err := m.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName,
		}); err != nil && errorCode(err) != "NoSuchEntity" {
			return fmt.Errorf("EC2NodeClass %q: removing role %s from instance profile %s: %w", nc.Name, aws.ToString(r.RoleName), name, err)
		}
	}
	_, err := m.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	switch {
	case errorCode(err) == "NoSuchEntity":
		return activities.NewInvalidNodeClassError(nc.Name, "spec.role", fmt.Sprintf("IAM role %s does not exist", role))
	case errorCode(err) == "LimitExceeded":
		// Another worker added a role first; the next resolution checks it.
		return fmt.Errorf("EC2NodeClass %q: instance profile %s got a role concurrently: %w", nc.Name, name, err)
	case err != nil:
		return fmt.Errorf("EC2NodeClass %q: adding role %s to instance profile %s: %w", nc.Name, role, name, err)
	}
	return nil
}

// ClassExists reports whether an EC2NodeClass of that name exists.
type ClassExists func(ctx context.Context, name string) (bool, error)

// GarbageCollect deletes the managed profiles whose EC2NodeClass is gone
// and which no instance launched for the class uses any more (removing the
// role first, as IAM requires). It returns the profiles it deleted and the
// classes whose profile waits for their instances to go.
func (m *InstanceProfileManager) GarbageCollect(ctx context.Context, exists ClassExists) (deleted, waiting []string, err error) {
	pages := iam.NewListInstanceProfilesPaginator(m.iam, &iam.ListInstanceProfilesInput{PathPrefix: aws.String(m.Path())})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return deleted, waiting, fmt.Errorf("listing instance profiles under %s: %w", m.Path(), err)
		}
		for _, profile := range page.InstanceProfiles {
			class := ""
			for _, t := range profile.Tags {
				if aws.ToString(t.Key) == apisv1.TagNodeClass {
					class = aws.ToString(t.Value)
				}
			}
			if class == "" || m.Name(class) != aws.ToString(profile.InstanceProfileName) {
				continue // not one this manager made
			}
			if ok, err := exists(ctx, class); err != nil || ok {
				if err != nil {
					return deleted, waiting, err
				}
				continue
			}
			inUse, err := m.classInUse(ctx, class)
			if err != nil {
				return deleted, waiting, err
			}
			if inUse {
				waiting = append(waiting, class)
				continue
			}
			if err := m.delete(ctx, profile); err != nil {
				return deleted, waiting, err
			}
			deleted = append(deleted, aws.ToString(profile.InstanceProfileName))
		}
	}
	return deleted, waiting, nil
}

func (m *InstanceProfileManager) classInUse(ctx context.Context, class string) (bool, error) {
	out, err := m.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{m.cluster}},
		{Name: aws.String("tag:" + apisv1.TagNodeClass), Values: []string{class}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	if err != nil {
		return false, fmt.Errorf("looking for instances of EC2NodeClass %q: %w", class, err)
	}
	for _, r := range out.Reservations {
		if len(r.Instances) > 0 {
			return true, nil
		}
	}
	return false, nil
}

func (m *InstanceProfileManager) delete(ctx context.Context, profile iamtypes.InstanceProfile) error {
	name := aws.ToString(profile.InstanceProfileName)
	for _, r := range profile.Roles {
		if _, err := m.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName,
		}); err != nil && errorCode(err) != "NoSuchEntity" {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := m.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && errorCode(err) != "NoSuchEntity" {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	m.mu.Lock()
	delete(m.ready, name)
	m.mu.Unlock()
	m.log.Info("Deleted instance profile", zap.String("instanceProfile", name))
	return nil
}
