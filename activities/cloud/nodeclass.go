package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
	"github.com/millwright/millwright/model/catalog"
)

// NodeClassGetter reads an EC2NodeClass by name (the worker implements it
// with an informer's lister). A missing class is reported with an error for
// which k8s.io/apimachinery's errors.IsNotFound is true.
type NodeClassGetter interface {
	GetEC2NodeClass(ctx context.Context, name string) (*apisv1.EC2NodeClass, error)
}

// NodeClassGetterFunc adapts a function to NodeClassGetter.
type NodeClassGetterFunc func(ctx context.Context, name string) (*apisv1.EC2NodeClass, error)

// GetEC2NodeClass calls f.
func (f NodeClassGetterFunc) GetEC2NodeClass(ctx context.Context, name string) (*apisv1.EC2NodeClass, error) {
	return f(ctx, name)
}

// Subnet is a subnet a NodeClass selected.
type Subnet struct {
	ID           string `json:"id"`
	Zone         string `json:"zone"`
	ZoneID       string `json:"zoneID,omitempty"`
	AvailableIPs int32  `json:"availableIPs"`
}

// SecurityGroup is a security group a NodeClass selected.
type SecurityGroup struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Image is an AMI a NodeClass selected.
type Image struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arch is the Kubernetes architecture (amd64, arm64).
	Arch         string    `json:"arch"`
	CreationDate time.Time `json:"creationDate"`
	// Variant is, for alias-selected EKS AMIs, "standard", "nvidia" or
	// "neuron"; empty for AMIs selected otherwise (one per architecture).
	Variant string `json:"variant,omitempty"`
	// Deprecated is true when AWS has deprecated the AMI; a deprecated AMI
	// is chosen only when no current one of its kind matches.
	Deprecated bool `json:"deprecated,omitempty"`
}

// EKS-optimized AMI variants an al2023 alias selects between.
const (
	variantStandard = "standard"
	variantNvidia   = "nvidia"
	variantNeuron   = "neuron"
)

// ResolvedNodeClass is an EC2NodeClass with its selector terms turned into
// concrete subnets, security groups, AMIs and an instance profile.
type ResolvedNodeClass struct {
	Name string
	// AMIFamily is the family that formats the userData (AL2, AL2023,
	// Bottlerocket, Windows2019/2022/2025 or Custom).
	AMIFamily string
	// Subnets are sorted by zone, then id.
	Subnets []Subnet
	// SecurityGroups are sorted by id.
	SecurityGroups []SecurityGroup
	// Images holds the newest selected AMI per architecture (and per variant
	// for an alias), newest first.
	Images []Image
	// InstanceProfile is the IAM instance profile name nodes launch with:
	// spec.instanceProfile, or the one Millwright manages for spec.role.
	InstanceProfile string
	// Spec is the class's spec (user data, disks, tags, metadata options,
	// kubelet settings).
	Spec apisv1.EC2NodeClassSpec
}

// Zones returns the zones of the class's subnets, sorted.
func (r *ResolvedNodeClass) Zones() []string {
	seen := map[string]bool{}
	var zones []string
	for _, s := range r.Subnets {
		if !seen[s.Zone] {
			seen[s.Zone] = true
			zones = append(zones, s.Zone)
		}
	}
	sort.Strings(zones)
	return zones
}

// SubnetsInZone returns the class's subnets in zone, sorted by id.
func (r *ResolvedNodeClass) SubnetsInZone(zone string) []Subnet {
	var out []Subnet
	for _, s := range r.Subnets {
		if s.Zone == zone {
			out = append(out, s)
		}
	}
	return out
}

// ImageFor returns the AMI an instance type launches with: one of its
// architecture, and for alias-selected AMIs the accelerator variant (nvidia
// for NVIDIA GPUs, neuron for Inferentia/Trainium, standard otherwise).
func (r *ResolvedNodeClass) ImageFor(spec catalog.InstanceTypeSpec) (Image, bool) {
	want := variantStandard
	switch {
	case spec.GPU.Resource == "aws.amazon.com/neuron":
		want = variantNeuron
	case spec.GPU.Manufacturer == "nvidia" && spec.GPU.Count > 0:
		want = variantNvidia
	}
	for _, im := range r.Images {
		if im.Arch != spec.Arch {
			continue
		}
		if im.Variant == "" || im.Variant == want {
			return im, true
		}
	}
	return Image{}, false
}

// DefaultNodeClassTTL is how long a resolution is reused.
const DefaultNodeClassTTL = time.Minute

const maxCachedNodeClasses = 1000

// NodeClassResolverOptions configures a NodeClassResolver.
type NodeClassResolverOptions struct {
	EC2 EC2API
	// SSM reads the parameters of ssmParameter AMI terms; nil refuses
	// such terms.
	SSM SSMAPI
	// InstanceProfiles manages the instance profiles of classes with a
	// role; nil refuses spec.role.
	InstanceProfiles *InstanceProfileManager
	// KubernetesVersion ("1.33"), when set, narrows alias AMIs to that
	// Kubernetes version; otherwise the newest AMI of any version is used.
	KubernetesVersion string
	Clock             clock.PassiveClock
	Logger            *zap.Logger
	TTL               time.Duration
}

// NodeClassResolver resolves EC2NodeClasses against EC2 and caches the
// answers per class spec for a TTL. Safe for concurrent use.
type NodeClassResolver struct {
	opts  NodeClassResolverOptions
	log   *zap.Logger
	cache *cache.LRUExpireCache
}

// NewNodeClassResolver returns a resolver with an empty cache.
func NewNodeClassResolver(opts NodeClassResolverOptions) (*NodeClassResolver, error) {
	if opts.EC2 == nil {
		return nil, fmt.Errorf("node class resolver: EC2 client is nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	defaultTTL(&opts.TTL, DefaultNodeClassTTL)
	return &NodeClassResolver{
		opts:  opts,
		log:   opts.Logger.Named("nodeclass"),
		cache: cache.NewLRUExpireCacheWithClock(maxCachedNodeClasses, opts.Clock),
	}, nil
}

// Resolve validates nc and resolves its selector terms. Problems with the
// class itself (a rule it breaks, a term that matches nothing, an AMI
// family Millwright cannot launch) are activities InvalidNodeClass errors
// naming the field; EC2 failures are returned wrapped.
func (r *NodeClassResolver) Resolve(ctx context.Context, nc *apisv1.EC2NodeClass) (*ResolvedNodeClass, error) {
	if err := nc.Validate(); err != nil {
		if ve, ok := apisv1.AsValidationError(err); ok && len(ve.Errors) > 0 {
			fe := ve.Errors[0]
			return nil, activities.NewInvalidNodeClassError(nc.Name, fe.Field, fe.ErrorBody())
		}
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec", err.Error())
	}
	key, err := specKey(nc)
	if err != nil {
		return nil, err
	}
	if cached, ok := r.cache.Get(key); ok {
		return cached.(*ResolvedNodeClass), nil
	}
	resolved, err := r.resolve(ctx, nc)
	if err != nil {
		return nil, err
	}
	r.cache.Add(key, resolved, r.opts.TTL)
	return resolved, nil
}

func specKey(nc *apisv1.EC2NodeClass) (string, error) {
	data, err := json.Marshal(nc.Spec)
	if err != nil {
		return "", fmt.Errorf("EC2NodeClass %q: encoding spec: %w", nc.Name, err)
	}
	sum := sha256.Sum256(data)
	return nc.Name + "/" + hex.EncodeToString(sum[:]), nil
}

func (r *NodeClassResolver) resolve(ctx context.Context, nc *apisv1.EC2NodeClass) (*ResolvedNodeClass, error) {
	out := &ResolvedNodeClass{Name: nc.Name, AMIFamily: nc.AMIFamily(), Spec: nc.Spec}
	if out.IsWindows() && nc.Spec.InstanceStorePolicy != nil {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.instanceStorePolicy",
			fmt.Sprintf("%s is not supported by the %s AMI family", *nc.Spec.InstanceStorePolicy, out.AMIFamily))
	}
	var err error
	if out.Subnets, err = r.subnets(ctx, nc); err != nil {
		return nil, err
	}
	if out.SecurityGroups, err = r.securityGroups(ctx, nc); err != nil {
		return nil, err
	}
	if out.Images, err = r.images(ctx, nc); err != nil {
		return nil, err
	}
	if out.InstanceProfile, err = r.instanceProfile(ctx, nc); err != nil {
		return nil, err
	}
	return out, nil
}

// IsWindows reports whether the class launches Windows nodes.
func (r *ResolvedNodeClass) IsWindows() bool { return isWindowsFamily(r.AMIFamily) }

func isWindowsFamily(family string) bool {
	switch family {
	case apisv1.AMIFamilyWindows2019, apisv1.AMIFamilyWindows2022, apisv1.AMIFamilyWindows2025:
		return true
	}
	return false
}

// instanceProfile is spec.instanceProfile, or for spec.role the instance
// profile Millwright manages for it (created, tagged and given the role
// on first resolution; see InstanceProfileManager).
func (r *NodeClassResolver) instanceProfile(ctx context.Context, nc *apisv1.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil {
		return *nc.Spec.InstanceProfile, nil
	}
	if r.opts.InstanceProfiles == nil {
		return "", activities.NewInvalidNodeClassError(nc.Name, "spec.role",
			"Millwright manages an instance profile for a role only with IAM access (the worker has no IAM client); set spec.instanceProfile instead")
	}
	return r.opts.InstanceProfiles.Ensure(ctx, nc)
}

// tagFilters turns selector tags into EC2 filters; "*" matches any value
// (a tag-key filter).
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var filters []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			filters = append(filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return filters
}

func (r *NodeClassResolver) subnets(ctx context.Context, nc *apisv1.EC2NodeClass) ([]Subnet, error) {
	byID := map[string]Subnet{}
	for i, term := range nc.Spec.SubnetSelectorTerms {
		input := &ec2.DescribeSubnetsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			input.SubnetIds = []string{term.ID}
		}
		pages := ec2.NewDescribeSubnetsPaginator(r.opts.EC2, input)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if isNotFound(err) {
				return nil, activities.NewInvalidNodeClassError(nc.Name, fmt.Sprintf("spec.subnetSelectorTerms[%d].id", i),
					fmt.Sprintf("subnet %s does not exist", term.ID))
			}
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %q: DescribeSubnets for spec.subnetSelectorTerms[%d]: %w", nc.Name, i, err)
			}
			for _, s := range page.Subnets {
				if s.State != "" && s.State != ec2types.SubnetStateAvailable {
					continue
				}
				byID[aws.ToString(s.SubnetId)] = Subnet{
					ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
					ZoneID: aws.ToString(s.AvailabilityZoneId), AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount),
				}
			}
		}
	}
	if len(byID) == 0 {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.subnetSelectorTerms", "matched no subnet")
	}
	out := make([]Subnet, 0, len(byID))
	for _, s := range byID {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (r *NodeClassResolver) securityGroups(ctx context.Context, nc *apisv1.EC2NodeClass) ([]SecurityGroup, error) {
	byID := map[string]SecurityGroup{}
	for i, term := range nc.Spec.SecurityGroupSelectorTerms {
		input := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			input.GroupIds = []string{term.ID}
		}
		if term.Name != "" {
			input.Filters = append(input.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{term.Name}})
		}
		pages := ec2.NewDescribeSecurityGroupsPaginator(r.opts.EC2, input)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if isNotFound(err) {
				return nil, activities.NewInvalidNodeClassError(nc.Name, fmt.Sprintf("spec.securityGroupSelectorTerms[%d].id", i),
					fmt.Sprintf("security group %s does not exist", term.ID))
			}
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %q: DescribeSecurityGroups for spec.securityGroupSelectorTerms[%d]: %w", nc.Name, i, err)
			}
			for _, g := range page.SecurityGroups {
				byID[aws.ToString(g.GroupId)] = SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
		}
	}
	if len(byID) == 0 {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.securityGroupSelectorTerms", "matched no security group")
	}
	out := make([]SecurityGroup, 0, len(byID))
	for _, g := range byID {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// images resolves amiSelectorTerms. An alias selects the EKS-optimized
// AMIs by their published names; other terms select by id, name (with
// owner) or tags. Either way the newest image per architecture (and per
// variant, for an alias) is kept.
func (r *NodeClassResolver) images(ctx context.Context, nc *apisv1.EC2NodeClass) ([]Image, error) {
	if family, version, ok := nc.Alias(); ok {
		return r.aliasImages(ctx, nc, family, version)
	}
	var found []Image
	for i, term := range nc.Spec.AMISelectorTerms {
		// As Karpenter: deprecated AMIs are looked at too, and chosen only
		// when nothing current matches (newestPerKind).
		input := &ec2.DescribeImagesInput{Filters: tagFilters(term.Tags), IncludeDeprecated: aws.Bool(true)}
		switch {
		case term.SSMParameter != "":
			id, err := r.ssmImageID(ctx, nc, i, term.SSMParameter)
			if err != nil {
				return nil, err
			}
			input.ImageIds = []string{id}
		case term.ID != "":
			input.ImageIds = []string{term.ID}
		default:
			if term.Name != "" {
				input.Filters = append(input.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
			}
			// As in Karpenter: without an owner, a name term looks at this
			// account's and Amazon's images only, never at anyone's.
			if term.Owner != "" {
				input.Owners = []string{term.Owner}
			} else if term.Name != "" {
				input.Owners = []string{"self", "amazon"}
			}
		}
		images, err := r.describeImages(ctx, input)
		if isNotFound(err) && term.SSMParameter != "" {
			return nil, activities.NewInvalidNodeClassError(nc.Name, fmt.Sprintf("spec.amiSelectorTerms[%d].ssmParameter", i),
				fmt.Sprintf("parameter %s names image %s, which does not exist", term.SSMParameter, input.ImageIds[0]))
		}
		if isNotFound(err) {
			return nil, activities.NewInvalidNodeClassError(nc.Name, fmt.Sprintf("spec.amiSelectorTerms[%d].id", i),
				fmt.Sprintf("image %s does not exist", term.ID))
		}
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %q: DescribeImages for spec.amiSelectorTerms[%d]: %w", nc.Name, i, err)
		}
		found = append(found, images...)
	}
	out := newestPerKind(found)
	if len(out) == 0 {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.amiSelectorTerms", "matched no image")
	}
	return out, nil
}

// publicAMIOwner is the owner alias of the EKS-optimized, Bottlerocket
// and Windows AMIs.
const publicAMIOwner = "amazon"

// aliasQuery is how one alias family's AMIs are found: the name patterns
// (per architecture and variant) for a Kubernetes version ("*" for any)
// and release ("*" for latest), the regular expression a found name must
// match (wildcards in a version would otherwise catch other families'
// names), and the variant a name is.
type aliasQuery struct {
	names   func(k8s, release string) []string
	match   *regexp.Regexp
	variant func(name string) string
	// release normalises the alias version to the release in the names.
	release func(version string) string
}

var aliasQueries = map[string]aliasQuery{
	"al2023": {
		names: func(k8s, release string) []string {
			var names []string
			for _, arch := range []string{"x86_64", "arm64"} {
				for _, variant := range []string{variantStandard, variantNvidia, variantNeuron} {
					names = append(names, fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, k8s, release))
				}
			}
			return names
		},
		match: regexp.MustCompile(`^amazon-eks-node-al2023-(x86_64|arm64)-(standard|nvidia|neuron)-[0-9.]+-v[0-9]+$`),
		variant: func(name string) string {
			// amazon-eks-node-al2023-x86_64-nvidia-1.33-v20250101
			if parts := strings.Split(name, "-"); len(parts) > 5 {
				return parts[5]
			}
			return variantStandard
		},
	},
	"al2": {
		names: func(k8s, release string) []string {
			return []string{
				fmt.Sprintf("amazon-eks-node-%s-%s", k8s, release),
				fmt.Sprintf("amazon-eks-arm64-node-%s-%s", k8s, release),
				fmt.Sprintf("amazon-eks-gpu-node-%s-%s", k8s, release),
			}
		},
		match: regexp.MustCompile(`^amazon-eks-(arm64-|gpu-)?node-[0-9.]+-v[0-9]+$`),
		variant: func(name string) string {
			if strings.HasPrefix(name, "amazon-eks-gpu-node-") {
				return variantNvidia
			}
			return variantStandard
		},
	},
	"bottlerocket": {
		names: func(k8s, release string) []string {
			var names []string
			for _, flavour := range []string{"", "-nvidia"} {
				for _, arch := range []string{"x86_64", "arm64"} {
					names = append(names, fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-%s-*", k8s, flavour, arch, release))
				}
			}
			return names
		},
		match: regexp.MustCompile(`^bottlerocket-aws-k8s-[0-9.]+(-nvidia)?-(x86_64|arm64)-v[0-9.]+-[0-9a-f]+$`),
		variant: func(name string) string {
			if strings.Contains(name, "-nvidia-") {
				return variantNvidia
			}
			return variantStandard
		},
		release: func(version string) string { return "v" + strings.TrimPrefix(version, "v") },
	},
}

// windowsAliasQuery finds the EKS-optimized Windows Server AMIs, named
// Windows_Server-2022-English-Core-EKS_Optimized-1.33-2025.06.13: a pinned
// alias (windows2022@v20250613) selects the release of that date, found by
// name as AWS publishes an SSM parameter for the latest release only.
func windowsAliasQuery(server string) aliasQuery {
	return aliasQuery{
		names: func(k8s, release string) []string {
			return []string{fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s-%s", server, k8s, release)}
		},
		match:   regexp.MustCompile(`^Windows_Server-` + server + `-English-Core-EKS_Optimized-[0-9.]+-[0-9.]+$`),
		variant: func(string) string { return variantStandard },
		release: windowsRelease,
	}
}

// windowsRelease turns an alias version vYYYYMMDD into the YYYY.MM.DD of
// the Windows AMI names; anything else is kept (and matches nothing).
func windowsRelease(version string) string {
	v := strings.TrimPrefix(version, "v")
	if len(v) != 8 {
		return version
	}
	return v[:4] + "." + v[4:6] + "." + v[6:]
}

func init() {
	for _, server := range []string{"2019", "2022", "2025"} {
		aliasQueries["windows"+server] = windowsAliasQuery(server)
	}
}

// aliasImages resolves family@version to the EKS-optimized (or
// Bottlerocket, or Windows) AMIs AWS publishes under that family's names:
// the given release, or for "latest" the newest current one, per
// architecture and variant, for the cluster's Kubernetes version.
func (r *NodeClassResolver) aliasImages(ctx context.Context, nc *apisv1.EC2NodeClass, family, version string) ([]Image, error) {
	query, ok := aliasQueries[family]
	if !ok {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.amiSelectorTerms[0].alias",
			fmt.Sprintf("alias family %q is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", family))
	}
	k8sVersion := r.opts.KubernetesVersion
	if k8sVersion == "" {
		k8sVersion = "*"
	}
	release := version
	switch {
	case version == "latest":
		release = "*"
	case query.release != nil:
		release = query.release(version)
	}
	names := query.names(k8sVersion, release)
	found, err := r.describeImages(ctx, &ec2.DescribeImagesInput{
		Owners:            []string{publicAMIOwner},
		IncludeDeprecated: aws.Bool(version != "latest"),
		Filters:           []ec2types.Filter{{Name: aws.String("name"), Values: names}},
	})
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %q: DescribeImages for alias %s@%s: %w", nc.Name, family, version, err)
	}
	var images []Image
	for _, im := range found {
		if !query.match.MatchString(im.Name) {
			continue
		}
		im.Variant = query.variant(im.Name)
		images = append(images, im)
	}
	out := newestPerKind(images)
	if len(out) == 0 {
		return nil, activities.NewInvalidNodeClassError(nc.Name, "spec.amiSelectorTerms[0].alias",
			fmt.Sprintf("no AMI matches %s@%s (names %s)", family, version, strings.Join(names, ", ")))
	}
	return out, nil
}

// ssmImageID reads the AMI id an ssmParameter term names.
func (r *NodeClassResolver) ssmImageID(ctx context.Context, nc *apisv1.EC2NodeClass, i int, name string) (string, error) {
	field := fmt.Sprintf("spec.amiSelectorTerms[%d].ssmParameter", i)
	if r.opts.SSM == nil {
		return "", activities.NewInvalidNodeClassError(nc.Name, field, "the worker has no SSM client to read the parameter with")
	}
	out, err := r.opts.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if errorCode(err) == "ParameterNotFound" {
		return "", activities.NewInvalidNodeClassError(nc.Name, field, fmt.Sprintf("parameter %s does not exist", name))
	}
	if err != nil {
		return "", fmt.Errorf("EC2NodeClass %q: SSM GetParameter %s for %s: %w", nc.Name, name, field, err)
	}
	id := aws.ToString(out.Parameter.Value)
	if !strings.HasPrefix(id, "ami-") {
		return "", activities.NewInvalidNodeClassError(nc.Name, field, fmt.Sprintf("parameter %s holds %q, not an AMI id", name, id))
	}
	return id, nil
}

func (r *NodeClassResolver) describeImages(ctx context.Context, input *ec2.DescribeImagesInput) ([]Image, error) {
	var out []Image
	pages := ec2.NewDescribeImagesPaginator(r.opts.EC2, input)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, im := range page.Images {
			if im.State != "" && im.State != ec2types.ImageStateAvailable {
				continue
			}
			arch := ""
			switch im.Architecture {
			case ec2types.ArchitectureValuesX8664:
				arch = "amd64"
			case ec2types.ArchitectureValuesArm64:
				arch = "arm64"
			default:
				continue
			}
			created, _ := time.Parse(time.RFC3339, aws.ToString(im.CreationDate))
			image := Image{ID: aws.ToString(im.ImageId), Name: aws.ToString(im.Name), Arch: arch, CreationDate: created}
			if deprecation, err := time.Parse(time.RFC3339, aws.ToString(im.DeprecationTime)); err == nil {
				image.Deprecated = !deprecation.After(r.opts.Clock.Now())
			}
			out = append(out, image)
		}
	}
	return out, nil
}

// newestPerKind keeps the newest image per (arch, variant), current
// images before deprecated ones, newest first (ties broken by id so the
// choice is stable).
func newestPerKind(images []Image) []Image {
	sort.Slice(images, func(i, j int) bool {
		if images[i].Deprecated != images[j].Deprecated {
			return !images[i].Deprecated
		}
		if !images[i].CreationDate.Equal(images[j].CreationDate) {
			return images[i].CreationDate.After(images[j].CreationDate)
		}
		return images[i].ID < images[j].ID
	})
	seen := map[string]bool{}
	var out []Image
	for _, im := range images {
		kind := im.Arch + "/" + im.Variant
		if seen[kind] {
			continue
		}
		seen[kind] = true
		out = append(out, im)
	}
	return out
}
