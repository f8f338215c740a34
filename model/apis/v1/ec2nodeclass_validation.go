package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// As in nodepool_validation.go, each check has a twin in the CRD unless its
// comment says "Go only".

const (
	maxSelectorTerms     = 30
	maxSelectorTags      = 20
	maxNodeClassTags     = 50
	maxTagKeyLen         = 128
	maxTagValueLen       = 256
	maxBlockDeviceMaps   = 50
	maxAliasLen          = 30
	maxSSMParameterLen   = 2048
	minHopLimit          = 1
	maxHopLimit          = 64
	maxImageGCPercentage = 100
)

var (
	subnetIDRE        = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	securityGroupIDRE = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	amiIDRE           = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	aliasRE           = regexp.MustCompile(`^[a-zA-Z0-9]+@.+$`)
	percentageRE      = regexp.MustCompile(`^[0-9]+([.][0-9]+)?%$`)
	volumeSizeRE      = regexp.MustCompile(`^[1-9][0-9]{0,5}(Gi|G|Ti|T)$`)
	maxVolumeSize     = resource.MustParse("64Ti")

	aliasFamilies        = []string{"al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"}
	windowsAliasFamilies = []string{"windows2019", "windows2022", "windows2025"}
	// windowsAliasVersionRE is a pinned Windows release: its date.
	windowsAliasVersionRE = regexp.MustCompile(`^v[0-9]{8}$`)
	restrictedTagKeys     = []string{TagNodePool, TagNodeClaim, TagNodeClass, TagEKSClusterName}
	enabledDisabled       = []string{MetadataEndpointEnabled, MetadataEndpointDisabled}
	requiredOptional      = []string{MetadataTokensRequired, MetadataTokensOptional}
	instanceStorePolices  = []InstanceStorePolicy{InstanceStorePolicyRAID0}
)

// RestrictedTagKeys are the tag keys an EC2NodeClass may not set, besides
// any key starting with kubernetes.io/cluster/ or aws:.
func RestrictedTagKeys() []string { return slices.Clone(restrictedTagKeys) }

// Validate checks the EC2NodeClass against every rule the CRD enforces and
// returns a *ValidationError listing all broken rules, or nil. Like the API
// server it judges the object after defaulting; the receiver is not changed.
func (nc *EC2NodeClass) Validate() error {
	return validationErrorOrNil("EC2NodeClass", nc.Name, nc.ValidationErrors())
}

// ValidationErrors is Validate's list, for callers that merge it with their
// own field errors.
func (nc *EC2NodeClass) ValidationErrors() field.ErrorList {
	defaulted := nc.DeepCopy()
	defaulted.SetDefaults()
	var errs field.ErrorList
	if defaulted.Name == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), ""))
	}
	errs = append(errs, defaulted.Spec.validate(field.NewPath("spec"))...)
	return errs
}

func (s *EC2NodeClassSpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSubnetTerms(path.Child("subnetSelectorTerms"), s.SubnetSelectorTerms)...)
	errs = append(errs, validateSecurityGroupTerms(path.Child("securityGroupSelectorTerms"), s.SecurityGroupSelectorTerms)...)
	errs = append(errs, validateAMITerms(path.Child("amiSelectorTerms"), s.AMISelectorTerms)...)
	errs = append(errs, s.validateAMIFamily(path.Child("amiFamily"))...)

	hasRole, hasProfile := s.Role != "", s.InstanceProfile != nil
	if hasRole == hasProfile {
		errs = append(errs, field.Invalid(path, roleOrProfile(s), "must specify exactly one of ['role', 'instanceProfile']"))
	}
	if hasProfile && *s.InstanceProfile == "" {
		errs = append(errs, field.Invalid(path.Child("instanceProfile"), "", "instanceProfile cannot be empty"))
	}

	errs = append(errs, validateNodeClassTags(path.Child("tags"), s.Tags)...)
	if s.Kubelet != nil {
		errs = append(errs, s.Kubelet.validate(path.Child("kubelet"))...)
	}
	errs = append(errs, validateBlockDeviceMappings(path.Child("blockDeviceMappings"), s.BlockDeviceMappings)...)
	if s.InstanceStorePolicy != nil && !slices.Contains(instanceStorePolices, *s.InstanceStorePolicy) {
		errs = append(errs, field.NotSupported(path.Child("instanceStorePolicy"), *s.InstanceStorePolicy, instanceStorePolices))
	}
	if s.MetadataOptions != nil {
		errs = append(errs, s.MetadataOptions.validate(path.Child("metadataOptions"))...)
	}
	errs = append(errs, (&EC2NodeClass{Spec: *s}).UnsupportedFieldsSet()...)
	return errs
}

func roleOrProfile(s *EC2NodeClassSpec) string {
	if s.Role == "" && s.InstanceProfile == nil {
		return "neither role nor instanceProfile"
	}
	return "both role and instanceProfile"
}

func validateTermCount(path *field.Path, n int) field.ErrorList {
	switch {
	case n == 0:
		return field.ErrorList{field.Required(path, "at least one selector term")}
	case n > maxSelectorTerms:
		return field.ErrorList{field.TooMany(path, n, maxSelectorTerms)}
	}
	return nil
}

func validateSelectorTags(path *field.Path, tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(tags) > maxSelectorTags {
		errs = append(errs, field.TooMany(path, len(tags), maxSelectorTags))
	}
	for _, k := range sets.List(sets.KeySet(tags)) {
		if k == "" || tags[k] == "" {
			errs = append(errs, field.Invalid(path.Key(k), tags[k], "empty tag keys or values aren't supported"))
		}
	}
	return errs
}

func validateSubnetTerms(path *field.Path, terms []SubnetSelectorTerm) field.ErrorList {
	errs := validateTermCount(path, len(terms))
	for i, t := range terms {
		p := path.Index(i)
		if len(t.Tags) == 0 && t.ID == "" {
			errs = append(errs, field.Required(p, "expected at least one, got none, ['tags', 'id']"))
		}
		if t.ID != "" && len(t.Tags) > 0 {
			errs = append(errs, field.Invalid(p, t.ID, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"))
		}
		if t.ID != "" && !subnetIDRE.MatchString(t.ID) {
			errs = append(errs, field.Invalid(p.Child("id"), t.ID, "must look like subnet-0123abcd"))
		}
		errs = append(errs, validateSelectorTags(p.Child("tags"), t.Tags)...)
	}
	return errs
}

func validateSecurityGroupTerms(path *field.Path, terms []SecurityGroupSelectorTerm) field.ErrorList {
	errs := validateTermCount(path, len(terms))
	for i, t := range terms {
		p := path.Index(i)
		hasTags, hasID, hasName := len(t.Tags) > 0, t.ID != "", t.Name != ""
		if !hasTags && !hasID && !hasName {
			errs = append(errs, field.Required(p, "expected at least one, got none, ['tags', 'id', 'name']"))
		}
		if hasID && (hasTags || hasName) {
			errs = append(errs, field.Invalid(p, t.ID, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"))
		}
		if hasName && (hasTags || hasID) {
			errs = append(errs, field.Invalid(p, t.Name, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"))
		}
		if hasID && !securityGroupIDRE.MatchString(t.ID) {
			errs = append(errs, field.Invalid(p.Child("id"), t.ID, "must look like sg-0123abcd"))
		}
		errs = append(errs, validateSelectorTags(p.Child("tags"), t.Tags)...)
	}
	return errs
}

func validateAMITerms(path *field.Path, terms []AMISelectorTerm) field.ErrorList {
	errs := validateTermCount(path, len(terms))
	if len(terms) > 1 && slices.ContainsFunc(terms, func(t AMISelectorTerm) bool { return t.Alias != "" }) {
		errs = append(errs, field.Invalid(path, len(terms), "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"))
	}
	for i, t := range terms {
		p := path.Index(i)
		hasAlias, hasTags, hasID, hasName, hasOwner, hasSSM := t.Alias != "", len(t.Tags) > 0, t.ID != "", t.Name != "", t.Owner != "", t.SSMParameter != ""
		if !hasAlias && !hasTags && !hasID && !hasName && !hasSSM {
			errs = append(errs, field.Required(p, "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"))
		}
		if hasID && (hasAlias || hasTags || hasName || hasOwner || hasSSM) {
			errs = append(errs, field.Invalid(p, t.ID, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"))
		}
		if hasAlias && (hasID || hasTags || hasName || hasOwner || hasSSM) {
			errs = append(errs, field.Invalid(p, t.Alias, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"))
		}
		if hasSSM && (hasID || hasAlias || hasTags || hasName || hasOwner) {
			errs = append(errs, field.Invalid(p, t.SSMParameter, "'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"))
		}
		if len(t.SSMParameter) > maxSSMParameterLen {
			errs = append(errs, field.TooLong(p.Child("ssmParameter"), t.SSMParameter, maxSSMParameterLen))
		}
		if hasID && !amiIDRE.MatchString(t.ID) {
			errs = append(errs, field.Invalid(p.Child("id"), t.ID, "must look like ami-0123abcd"))
		}
		if hasAlias {
			errs = append(errs, validateAlias(p.Child("alias"), t.Alias)...)
		}
		errs = append(errs, validateSelectorTags(p.Child("tags"), t.Tags)...)
	}
	return errs
}

func validateAlias(path *field.Path, alias string) field.ErrorList {
	var errs field.ErrorList
	if len(alias) > maxAliasLen {
		errs = append(errs, field.TooLong(path, alias, maxAliasLen))
	}
	if !aliasRE.MatchString(alias) {
		errs = append(errs, field.Invalid(path, alias, "'alias' is improperly formatted, must match the format 'family@version'"))
	}
	family, version, _ := strings.Cut(alias, "@")
	if !slices.Contains(aliasFamilies, family) {
		errs = append(errs, field.NotSupported(path, family, aliasFamilies))
	}
	if slices.Contains(windowsAliasFamilies, family) && version != "latest" && !windowsAliasVersionRE.MatchString(version) {
		errs = append(errs, field.Invalid(path, alias, "windows versions must be 'latest' or a release date 'vYYYYMMDD'"))
	}
	return errs
}

func (s *EC2NodeClassSpec) validateAMIFamily(path *field.Path) field.ErrorList {
	aliasFamily := ""
	for _, t := range s.AMISelectorTerms {
		if t.Alias != "" {
			aliasFamily, _, _ = strings.Cut(t.Alias, "@")
			break
		}
	}
	hasAlias := slices.ContainsFunc(s.AMISelectorTerms, func(t AMISelectorTerm) bool { return t.Alias != "" })
	if s.AMIFamily == nil {
		if !hasAlias {
			return field.ErrorList{field.Required(path, "must specify amiFamily if amiSelectorTerms does not contain an alias")}
		}
		return nil
	}
	family := *s.AMIFamily
	if !slices.Contains(SupportedAMIFamilies, family) {
		return field.ErrorList{field.NotSupported(path, family, SupportedAMIFamilies)}
	}
	// The CEL rule accepts the family of any alias term; with more than one
	// term an alias is already an error, so the first alias is the one.
	if hasAlias && family != AMIFamilyCustom && !slices.ContainsFunc(s.AMISelectorTerms, func(t AMISelectorTerm) bool {
		f, _, _ := strings.Cut(t.Alias, "@")
		return t.Alias != "" && f == strings.ToLower(family)
	}) {
		return field.ErrorList{field.Invalid(path, family, fmt.Sprintf("if set, amiFamily must be 'Custom' or the family of the alias (%q)", aliasFamily))}
	}
	return nil
}

func validateNodeClassTags(path *field.Path, tags map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(tags) > maxNodeClassTags {
		errs = append(errs, field.TooMany(path, len(tags), maxNodeClassTags))
	}
	for _, k := range sets.List(sets.KeySet(tags)) {
		p := path.Key(k)
		switch {
		case k == "":
			errs = append(errs, field.Invalid(p, k, "empty tag keys aren't supported"))
		case strings.HasPrefix(k, TagClusterPrefix):
			errs = append(errs, field.Invalid(p, k, "tag contains a restricted tag matching kubernetes.io/cluster/"))
		case slices.Contains(restrictedTagKeys, k):
			errs = append(errs, field.Invalid(p, k, "tag contains a restricted tag: millwright.dev/nodepool, millwright.dev/nodeclaim, millwright.dev/ec2nodeclass and eks:eks-cluster-name are set by Millwright or EKS"))
		case strings.HasPrefix(k, "aws:"):
			errs = append(errs, field.Invalid(p, k, "tag keys starting with 'aws:' are reserved by AWS"))
		}
		if len(k) > maxTagKeyLen || len(tags[k]) > maxTagValueLen {
			errs = append(errs, field.Invalid(p, tags[k], fmt.Sprintf("tag keys must be at most %d characters and values at most %d", maxTagKeyLen, maxTagValueLen)))
		}
	}
	return errs
}

func (k *KubeletConfiguration) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	type namedInt struct {
		name  string
		value *int32
	}
	for _, f := range []namedInt{{"maxPods", k.MaxPods}, {"podsPerCore", k.PodsPerCore}, {"evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod}} {
		if f.value != nil && *f.value < 0 {
			errs = append(errs, field.Invalid(path.Child(f.name), *f.value, "must be greater than or equal to 0"))
		}
	}
	for _, f := range []namedInt{{"imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent}, {"imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent}} {
		if f.value != nil && (*f.value < 0 || *f.value > maxImageGCPercentage) {
			errs = append(errs, field.Invalid(path.Child(f.name), *f.value, "must be between 0 and 100"))
		}
	}
	if k.ImageGCHighThresholdPercent != nil && k.ImageGCLowThresholdPercent != nil && *k.ImageGCHighThresholdPercent <= *k.ImageGCLowThresholdPercent {
		errs = append(errs, field.Invalid(path.Child("imageGCHighThresholdPercent"), *k.ImageGCHighThresholdPercent, "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"))
	}
	errs = append(errs, validateReserved(path.Child("systemReserved"), k.SystemReserved)...)
	errs = append(errs, validateReserved(path.Child("kubeReserved"), k.KubeReserved)...)
	errs = append(errs, validateEvictionThresholds(path.Child("evictionHard"), k.EvictionHard)...)
	errs = append(errs, validateEvictionThresholds(path.Child("evictionSoft"), k.EvictionSoft)...)

	gracePath := path.Child("evictionSoftGracePeriod")
	for _, signal := range sets.List(sets.KeySet(k.EvictionSoftGracePeriod)) {
		if !slices.Contains(SupportedEvictionSignals, signal) {
			errs = append(errs, field.NotSupported(gracePath.Key(signal), signal, SupportedEvictionSignals))
		}
		if d := k.EvictionSoftGracePeriod[signal]; !softGracePeriodRE.MatchString(string(d)) {
			errs = append(errs, field.Invalid(gracePath.Key(signal), string(d), "evictionSoftGracePeriod values must be durations in h, m and s units"))
		}
		if _, ok := k.EvictionSoft[signal]; !ok {
			errs = append(errs, field.Invalid(gracePath.Key(signal), signal, "evictionSoftGracePeriod key does not have a matching evictionSoft"))
		}
	}
	for _, signal := range sets.List(sets.KeySet(k.EvictionSoft)) {
		if _, ok := k.EvictionSoftGracePeriod[signal]; !ok {
			errs = append(errs, field.Invalid(path.Child("evictionSoft").Key(signal), signal, "evictionSoft key does not have a matching evictionSoftGracePeriod"))
		}
	}
	return errs
}

func validateReserved(path *field.Path, reserved map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sets.List(sets.KeySet(reserved)) {
		p := path.Key(name)
		if !slices.Contains(SupportedReservedResources, name) {
			errs = append(errs, field.NotSupported(p, name, SupportedReservedResources))
		}
		if q, err := resource.ParseQuantity(reserved[name]); err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, reserved[name], "must be a non-negative resource quantity"))
		}
	}
	return errs
}

func validateEvictionThresholds(path *field.Path, thresholds map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, signal := range sets.List(sets.KeySet(thresholds)) {
		p := path.Key(signal)
		if !slices.Contains(SupportedEvictionSignals, signal) {
			errs = append(errs, field.NotSupported(p, signal, SupportedEvictionSignals))
		}
		v := thresholds[signal]
		if percentageRE.MatchString(v) {
			continue
		}
		if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, v, "must be a percentage (\"10%\") or a non-negative quantity (\"100Mi\")"))
		}
	}
	return errs
}

func validateBlockDeviceMappings(path *field.Path, mappings []BlockDeviceMapping) field.ErrorList {
	var errs field.ErrorList
	if len(mappings) > maxBlockDeviceMaps {
		errs = append(errs, field.TooMany(path, len(mappings), maxBlockDeviceMaps))
	}
	for i, m := range mappings {
		p := path.Index(i)
		if m.EBS == nil {
			continue
		}
		ebsPath := p.Child("ebs")
		if m.EBS.SnapshotID == nil && m.EBS.VolumeSize == nil {
			errs = append(errs, field.Required(ebsPath, "snapshotID or volumeSize must be defined"))
		}
		if size := m.EBS.VolumeSize; size != nil {
			if !volumeSizeRE.MatchString(size.String()) {
				errs = append(errs, field.Invalid(ebsPath.Child("volumeSize"), size.String(), "must be a whole number of Gi, G, Ti or T (e.g. 100Gi)"))
			} else if size.Cmp(maxVolumeSize) > 0 {
				errs = append(errs, field.Invalid(ebsPath.Child("volumeSize"), size.String(), "volumeSize must be at most 64Ti"))
			}
		}
		if m.EBS.VolumeType != nil && !slices.Contains(SupportedVolumeTypes, *m.EBS.VolumeType) {
			errs = append(errs, field.NotSupported(ebsPath.Child("volumeType"), *m.EBS.VolumeType, SupportedVolumeTypes))
		}
	}
	return errs
}

func (m *MetadataOptions) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.HTTPEndpoint != nil && !slices.Contains(enabledDisabled, *m.HTTPEndpoint) {
		errs = append(errs, field.NotSupported(path.Child("httpEndpoint"), *m.HTTPEndpoint, enabledDisabled))
	}
	if m.HTTPProtocolIPv6 != nil && !slices.Contains(enabledDisabled, *m.HTTPProtocolIPv6) {
		errs = append(errs, field.NotSupported(path.Child("httpProtocolIPv6"), *m.HTTPProtocolIPv6, enabledDisabled))
	}
	if m.HTTPPutResponseHopLimit != nil && (*m.HTTPPutResponseHopLimit < minHopLimit || *m.HTTPPutResponseHopLimit > maxHopLimit) {
		errs = append(errs, field.Invalid(path.Child("httpPutResponseHopLimit"), *m.HTTPPutResponseHopLimit, fmt.Sprintf("must be between %d and %d", minHopLimit, maxHopLimit)))
	}
	if m.HTTPTokens != nil && !slices.Contains(requiredOptional, *m.HTTPTokens) {
		errs = append(errs, field.NotSupported(path.Child("httpTokens"), *m.HTTPTokens, requiredOptional))
	}
	return errs
}
