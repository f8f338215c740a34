package v1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// UnsupportedField is a field of Karpenter's v1 API that Millwright does
// not implement. The types declare it only to refuse it: an object that sets
// it is refused by the CRD (a CEL rule) and by Validate, naming the field and
// the reason, whatever the client's field validation, instead of the field
// being dropped as unknown.
type UnsupportedField struct {
	// Path from the object's root; list indexes are written [*].
	Path string
	// Reason is the refusal's message.
	Reason string
}

// Unsupported fields, by kind. Each message is also the CRD rule's
// (TestUnsupportedFieldsRefusedByCRD keeps them equal).
var (
	UnsupportedNodePoolFields = []UnsupportedField{
		{"spec.replicas", "replicas is not supported: Millwright has no static-capacity NodePools (spec.minNodes keeps a warm minimum)"},
	}
	UnsupportedEC2NodeClassFields = []UnsupportedField{
		{"spec.capacityReservationSelectorTerms", "capacityReservationSelectorTerms is not supported: Millwright launches no capacity reservations"},
		{"spec.placementGroupSelector", "placementGroupSelector is not supported: Millwright launches into no placement group"},
		{"spec.ipPrefixCount", "ipPrefixCount is not supported: Millwright assigns no IP prefixes"},
		{"spec.networkInterfaces", "networkInterfaces is not supported: Millwright launches with the subnet's default network interface"},
		{"spec.connectionTracking", "connectionTracking is not supported: Millwright sets no connection tracking timeouts"},
		{"spec.context", "context is not supported: Millwright passes no EC2 Fleet context"},
		{"spec.cpuOptions", "cpuOptions is not supported: Millwright launches with the instance type's default CPU options"},
		{"spec.blockDeviceMappings[*].rootVolume", "rootVolume is not supported: Millwright plans and registers every node with the default 20Gi of ephemeral storage, whatever the block device mappings; remove it"},
		{"spec.blockDeviceMappings[*].ebs.volumeInitializationRate", "volumeInitializationRate is not supported: Millwright sets no EBS volume initialization rate"},
	}
)

// unsupportedReason is the Reason of the field at pattern path.
func unsupportedReason(fields []UnsupportedField, pattern string) string {
	for _, f := range fields {
		if f.Path == pattern {
			return f.Reason
		}
	}
	return pattern + " is not supported"
}

// UnsupportedFieldsSet lists the unsupported fields the pool sets, as
// field errors (Forbidden, with the reason).
func (np *NodePool) UnsupportedFieldsSet() field.ErrorList {
	var errs field.ErrorList
	if np.Spec.Replicas != nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "replicas"), unsupportedReason(UnsupportedNodePoolFields, "spec.replicas")))
	}
	return errs
}

// UnsupportedFieldsSet lists the unsupported fields the class sets, as
// field errors (Forbidden, with the reason).
func (nc *EC2NodeClass) UnsupportedFieldsSet() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	refuse := func(path *field.Path, pattern string) {
		errs = append(errs, field.Forbidden(path, unsupportedReason(UnsupportedEC2NodeClassFields, pattern)))
	}
	s := &nc.Spec
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"capacityReservationSelectorTerms", s.CapacityReservationSelectorTerms != nil},
		{"placementGroupSelector", s.PlacementGroupSelector != nil},
		{"ipPrefixCount", s.IPPrefixCount != nil},
		{"networkInterfaces", s.NetworkInterfaces != nil},
		{"connectionTracking", s.ConnectionTracking != nil},
		{"context", s.Context != nil},
		{"cpuOptions", s.CPUOptions != nil},
	} {
		if f.set {
			refuse(spec.Child(f.name), "spec."+f.name)
		}
	}
	for i, m := range s.BlockDeviceMappings {
		if m.RootVolume {
			refuse(spec.Child("blockDeviceMappings").Index(i).Child("rootVolume"), "spec.blockDeviceMappings[*].rootVolume")
		}
		if m.EBS != nil && m.EBS.VolumeInitializationRate != nil {
			refuse(spec.Child("blockDeviceMappings").Index(i).Child("ebs", "volumeInitializationRate"),
				"spec.blockDeviceMappings[*].ebs.volumeInitializationRate")
		}
	}
	return errs
}
