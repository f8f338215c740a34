package v1

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/millwright/millwright/deploy/crds"
)

// apiServerSim runs what kube-apiserver runs on a create of a custom
// resource, in process and from the generated CRD: prune unknown fields, drop
// nulls, apply schema defaults, then validate against the OpenAPI schema, the
// list-type invariants and the CEL rules. It lets tests prove the Go
// Validate/SetDefaults and the CRD agree without a cluster. (The local-stack
// tests apply the same CRDs to a real API server.)
type apiServerSim struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	structural *structuralschema.Structural
	schema     schemavalidation.SchemaValidator
	cel        *cel.Validator
}

// loadCRD reads one generated manifest strictly (an unknown field would mean
// the YAML and the apiextensions types disagree).
func loadCRD(t testing.TB, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := crds.Get(file)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("parsing %s as a CustomResourceDefinition: %v", file, err)
	}
	return crd
}

// internalCRD converts a v1 CRD to the internal form the apiextensions
// validation and schema packages take, after the v1 defaults the API server
// applies on create.
func internalCRD(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsinternal.CustomResourceDefinition {
	t.Helper()
	defaulted := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(defaulted)
	out := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(defaulted, out, nil); err != nil {
		t.Fatalf("converting CRD %s: %v", crd.Name, err)
	}
	return out
}

// validateCRDDefinition returns what the API server would say about creating
// the CRD itself: structural-schema rules, CEL compilation and the CEL cost
// budget.
func validateCRDDefinition(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	t.Helper()
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), internalCRD(t, crd))
}

func newAPIServerSim(t testing.TB, file string) *apiServerSim {
	t.Helper()
	crd := loadCRD(t, file)
	internal := internalCRD(t, crd)
	if len(internal.Spec.Versions) != 1 {
		t.Fatalf("%s: expected one version, got %d", file, len(internal.Spec.Versions))
	}
	// The internal form hoists a schema shared by all versions to
	// spec.validation.
	var props *apiextensionsinternal.JSONSchemaProps
	switch {
	case internal.Spec.Validation != nil:
		props = internal.Spec.Validation.OpenAPIV3Schema
	case internal.Spec.Versions[0].Schema != nil:
		props = internal.Spec.Versions[0].Schema.OpenAPIV3Schema
	default:
		t.Fatalf("%s: no schema", file)
	}
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatalf("%s: schema is not structural: %v", file, err)
	}
	schema, _, err := schemavalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatalf("%s: building schema validator: %v", file, err)
	}
	return &apiServerSim{
		crd:        crd,
		structural: structural,
		schema:     schema,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// toUnstructured encodes a Go object the way a client sends it.
func toUnstructured(t testing.TB, obj any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	// apimachinery's decoder, like the API server's, turns whole numbers into
	// int64 (encoding/json would give float64, which CEL types differently).
	u := map[string]any{}
	if err := utiljson.Unmarshal(data, &u); err != nil {
		t.Fatalf("decoding %T as unstructured: %v", obj, err)
	}
	return u
}

// decode runs the API server's decoding steps: pruning (an unknown field is
// reported, as kubectl's strict field validation does), null dropping and
// defaulting. It returns the object as it would be stored.
func (s *apiServerSim) decode(u map[string]any) (map[string]any, field.ErrorList) {
	var errs field.ErrorList
	unknown := structuralpruning.PruneWithOptions(u, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		errs = append(errs, field.Invalid(field.NewPath(p), nil, "unknown field"))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u, s.structural)
	structuraldefaulting.Default(u, s.structural)
	return u, errs
}

// create returns every error the API server would report on creating obj.
// Like the server, it skips CEL when the schema found a "blocking" error
// (required, enum, too long, too many, wrong type).
func (s *apiServerSim) create(t testing.TB, obj any) field.ErrorList {
	t.Helper()
	u, errs := s.decode(toUnstructured(t, obj))
	errs = append(errs, schemavalidation.ValidateCustomResource(nil, u, s.schema)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, u)...)
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return append(errs, field.Invalid(nil, nil, celSkippedDetail))
		}
	}
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// update is create plus the CEL transition rules (oldSelf).
func (s *apiServerSim) update(t testing.TB, obj, old any) field.ErrorList {
	t.Helper()
	u, errs := s.decode(toUnstructured(t, obj))
	o, _ := s.decode(toUnstructured(t, old))
	errs = append(errs, schemavalidation.ValidateCustomResourceUpdate(nil, u, o, s.schema)...)
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, u, o, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// celSkippedDetail is the API server's note that it skipped CEL rules after
// a blocking schema error.
const celSkippedDetail = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// rootPath is how field.Path prints the path of the root object.
var rootPath = (*field.Path)(nil).String()

// mapKeyRE matches a non-numeric subscript: Go's field.Path writes a map
// entry as labels[key], the OpenAPI validator as labels.key.
var mapKeyRE = regexp.MustCompile(`\[([^\]]*[^0-9\]][^\]]*)\]`)

// pathsAgree reports whether two field paths name the same place or one
// contains the other. The API server reports a CEL rule at the node it is
// declared on (e.g. a map), while Go may name the entry (map[key]).
//
// A rule on the root object (the NodePool name rule) is reported at "<nil>",
// which contains every path.
func pathsAgree(a, b string) bool {
	a, b = mapKeyRE.ReplaceAllString(a, ".$1"), mapKeyRE.ReplaceAllString(b, ".$1")
	if a == b || a == rootPath || b == rootPath {
		return true
	}
	within := func(inner, outer string) bool {
		return strings.HasPrefix(inner, outer+".") || strings.HasPrefix(inner, outer+"[")
	}
	return within(a, b) || within(b, a)
}

func anyPathAgrees(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if pathsAgree(e.Field, path) {
			return true
		}
	}
	return false
}

func describe(errs field.ErrorList) string {
	if len(errs) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s\n", e.Error())
	}
	return b.String()
}

// equalJSON compares two objects by their JSON encoding.
func equalJSON(t testing.TB, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
