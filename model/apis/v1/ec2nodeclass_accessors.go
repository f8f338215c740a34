package v1

import "strings"

// aliasFamilyToAMIFamily maps the family part of an alias to AMIFamily.
var aliasFamilyToAMIFamily = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// Alias returns the family and version of the class's alias term
// ("al2023", "latest"); ok is false when it selects AMIs otherwise.
func (nc *EC2NodeClass) Alias() (family, version string, ok bool) {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			family, version, _ = strings.Cut(t.Alias, "@")
			return family, version, true
		}
	}
	return "", "", false
}

// AMIFamily is the AMI family that decides user-data format and default
// disks: spec.amiFamily when set, else the family the alias names, else "".
func (nc *EC2NodeClass) AMIFamily() string {
	if nc.Spec.AMIFamily != nil {
		return *nc.Spec.AMIFamily
	}
	if family, _, ok := nc.Alias(); ok {
		return aliasFamilyToAMIFamily[family]
	}
	return ""
}

// IMDSv2Required reports whether the nodes' metadata service demands session
// tokens; true unless httpTokens is explicitly "optional".
func (nc *EC2NodeClass) IMDSv2Required() bool {
	mo := nc.Spec.MetadataOptions
	return mo == nil || mo.HTTPTokens == nil || *mo.HTTPTokens != MetadataTokensOptional
}
