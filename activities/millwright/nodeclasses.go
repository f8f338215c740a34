package millwright

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/activities/planning"
	apisv1 "github.com/millwright/millwright/model/apis/v1"
)

// NodeClassReader reads EC2NodeClasses for the Launch activity straight from
// the API server, so a launch always sees the class as it is now. It
// applies the CRD's defaults and refuses a class that fails validation with
// the contract's non-retryable InvalidNodeClass error naming the field; a
// missing class is reported as not found (which Launch also turns into
// InvalidNodeClass).
type NodeClassReader struct {
	dynamic dynamic.Interface
}

var _ cloud.NodeClassGetter = (*NodeClassReader)(nil)

// NewNodeClassReader reads through dynamicClient.
func NewNodeClassReader(dynamicClient dynamic.Interface) *NodeClassReader {
	return &NodeClassReader{dynamic: dynamicClient}
}

// GetEC2NodeClass returns the defaulted, valid EC2NodeClass called name.
func (r *NodeClassReader) GetEC2NodeClass(ctx context.Context, name string) (*apisv1.EC2NodeClass, error) {
	obj, err := r.dynamic.Resource(planning.EC2NodeClassResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var nc apisv1.EC2NodeClass
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &nc); err != nil {
		return nil, activities.NewInvalidNodeClassError(name, "metadata", fmt.Sprintf("cannot be decoded: %v", err))
	}
	nc.SetDefaults()
	if err := nc.Validate(); err != nil {
		field := "spec"
		if ve, ok := apisv1.AsValidationError(err); ok && len(ve.Errors) > 0 {
			field = ve.Errors[0].Field
		}
		return nil, activities.NewInvalidNodeClassError(name, field, err.Error())
	}
	return &nc, nil
}
