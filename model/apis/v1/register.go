package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of every Millwright resource, and the domain of the
// labels, annotations and tags Millwright owns.
const Group = "millwright.dev"

// GroupVersion is millwright.dev/v1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// SchemeGroupVersion is GroupVersion under the name client-go generated code
// and scheme helpers expect.
var SchemeGroupVersion = GroupVersion

var (
	// SchemeBuilder registers this package's kinds in a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds NodePool, EC2NodeClass and NodeClaim and their
	// lists (and the meta/v1 option types) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind qualifies a kind with this package's group.
func Kind(kind string) schema.GroupKind { return GroupVersion.WithKind(kind).GroupKind() }

// Resource qualifies a resource (plural, lower case) with this package's group.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&NodePool{}, &NodePoolList{},
		&EC2NodeClass{}, &EC2NodeClassList{},
		&NodeClaim{}, &NodeClaimList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
