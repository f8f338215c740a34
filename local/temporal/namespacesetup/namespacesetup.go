// Package namespacesetup prepares a Temporal namespace for an application:
// it registers the namespace if asked and adds the custom search attributes
// the application needs, idempotently, through the public workflow and
// operator services — so it works the same against the embedded dev server
// and an external cluster (`starter setup`). It only adds: it never removes
// or retypes an attribute and never changes an existing namespace.
package namespacesetup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultWaitTimeout bounds how long EnsureSearchAttributes waits for new
// attributes to become usable when the caller's context has no deadline.
const DefaultWaitTimeout = time.Minute

// pollInterval is how often registration state is re-read while waiting.
// Registration is eventually consistent (namespace caches refresh every few
// seconds), so we poll the server rather than guess a delay.
const pollInterval = 200 * time.Millisecond

// SearchAttributeTypeConflictError says a search attribute already exists on
// the namespace with a different type than the application needs. Temporal
// cannot retype an attribute; an operator has to resolve it.
type SearchAttributeTypeConflictError struct {
	Namespace string
	Name      string
	Want      enumspb.IndexedValueType
	Have      enumspb.IndexedValueType
}

func (e *SearchAttributeTypeConflictError) Error() string {
	return fmt.Sprintf("search attribute %s on namespace %s has type %s, need %s (Temporal cannot change the type of an attribute; remove it or use another namespace)",
		e.Name, e.Namespace, e.Have, e.Want)
}

// IsSearchAttributeTypeConflict reports whether err is a SearchAttributeTypeConflictError.
func IsSearchAttributeTypeConflict(err error) bool {
	var target *SearchAttributeTypeConflictError
	return errors.As(err, &target)
}

// SearchAttributesNotAllowedError says the server refused to add search
// attributes through the operator service, as Temporal Cloud does; they have
// to be added with the Cloud tooling instead.
type SearchAttributesNotAllowedError struct {
	Namespace string
	Missing   map[string]enumspb.IndexedValueType
	Err       error
}

func (e *SearchAttributesNotAllowedError) Error() string {
	return fmt.Sprintf("the server refused to add search attributes %s to namespace %s: %v; on Temporal Cloud add them with `tcld namespace search-attributes add` or the Cloud UI, then re-run",
		describeAttributes(e.Missing), e.Namespace, e.Err)
}

func (e *SearchAttributesNotAllowedError) Unwrap() error { return e.Err }

// IsSearchAttributesNotAllowed reports whether err is a SearchAttributesNotAllowedError.
func IsSearchAttributesNotAllowed(err error) bool {
	var target *SearchAttributesNotAllowedError
	return errors.As(err, &target)
}

// EnsureNamespace registers namespace with the given retention unless it
// already exists, and returns once the namespace accepts requests. It reports
// whether it created it.
//
// When ctx has no deadline, waiting is bounded by DefaultWaitTimeout.
func EnsureNamespace(ctx context.Context, workflows workflowservice.WorkflowServiceClient, namespace string, retention time.Duration) (bool, error) {
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}
	_, err := workflows.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err == nil {
		return false, nil
	}
	var notFound *serviceerror.NamespaceNotFound
	if !errors.As(err, &notFound) {
		return false, fmt.Errorf("describing namespace %s: %w", namespace, err)
	}
	_, err = workflows.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var alreadyExists *serviceerror.NamespaceAlreadyExists
	if errors.As(err, &alreadyExists) {
		// Someone else registered it between our describe and register.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("registering namespace %s: %w", namespace, err)
	}
	if err := waitUntilNamespaceServes(ctx, workflows, namespace); err != nil {
		return true, err
	}
	return true, nil
}

// waitUntilNamespaceServes polls until a request scoped to the namespace is
// accepted. A new namespace is in the database at once but only reaches the
// frontend's namespace cache at its next refresh; until then every request
// naming it fails with NamespaceNotFound.
func waitUntilNamespaceServes(ctx context.Context, workflows workflowservice.WorkflowServiceClient, namespace string) error {
	var lastProblem error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		_, err := workflows.CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace})
		lastProblem = err
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for new namespace %s to accept requests: %w (last: %v)", namespace, err, lastProblem)
	}
	return nil
}

// EnsureSearchAttributes adds the attributes of want that namespace lacks and
// waits until all of want can be used in visibility queries. Attributes that
// exist with the wanted type are left alone; one that exists with another type
// is a SearchAttributeTypeConflictError. It returns the names it added.
//
// When ctx has no deadline, waiting is bounded by DefaultWaitTimeout.
func EnsureSearchAttributes(
	ctx context.Context,
	operator operatorservice.OperatorServiceClient,
	workflows workflowservice.WorkflowServiceClient,
	namespace string,
	want map[string]enumspb.IndexedValueType,
) ([]string, error) {
	if len(want) == 0 {
		return nil, nil
	}
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitTimeout)
		defer cancel()
	}

	have, err := listCustomAttributes(ctx, operator, namespace)
	if err != nil {
		return nil, err
	}
	missing, err := missingAttributes(namespace, want, have)
	if err != nil {
		return nil, err
	}
	added := slices.Sorted(maps.Keys(missing))
	if len(missing) > 0 {
		_, err := operator.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace:        namespace,
			SearchAttributes: missing,
		})
		var alreadyExists *serviceerror.AlreadyExists
		var permissionDenied *serviceerror.PermissionDenied
		var unimplemented *serviceerror.Unimplemented
		switch {
		case err == nil:
		case errors.As(err, &alreadyExists):
			// Added concurrently by someone else; the wait below checks the types.
		case errors.As(err, &permissionDenied), errors.As(err, &unimplemented):
			return nil, &SearchAttributesNotAllowedError{Namespace: namespace, Missing: missing, Err: err}
		default:
			return nil, fmt.Errorf("adding search attributes %s to namespace %s: %w", describeAttributes(missing), namespace, err)
		}
	}

	if err := waitUntilUsable(ctx, operator, workflows, namespace, want); err != nil {
		return nil, err
	}
	return added, nil
}

// missingAttributes returns the attributes of want that have does not hold,
// or a type conflict for one it holds with another type.
func missingAttributes(namespace string, want, have map[string]enumspb.IndexedValueType) (map[string]enumspb.IndexedValueType, error) {
	missing := make(map[string]enumspb.IndexedValueType)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		haveType, exists := have[name]
		switch {
		case !exists:
			missing[name] = want[name]
		case haveType != want[name]:
			return nil, &SearchAttributeTypeConflictError{Namespace: namespace, Name: name, Want: want[name], Have: haveType}
		}
	}
	return missing, nil
}

func listCustomAttributes(ctx context.Context, operator operatorservice.OperatorServiceClient, namespace string) (map[string]enumspb.IndexedValueType, error) {
	resp, err := operator.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("listing search attributes of namespace %s: %w", namespace, err)
	}
	return resp.GetCustomAttributes(), nil
}

// waitUntilUsable polls until every wanted attribute is listed with its type
// and the frontend accepts a visibility query naming all of them. The second
// check matters: the listing reads the database, while query validation (and
// workflow upserts) go through per-service namespace caches that refresh on
// their own schedule.
func waitUntilUsable(
	ctx context.Context,
	operator operatorservice.OperatorServiceClient,
	workflows workflowservice.WorkflowServiceClient,
	namespace string,
	want map[string]enumspb.IndexedValueType,
) error {
	query := probeQuery(want)
	var lastProblem error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		have, err := listCustomAttributes(ctx, operator, namespace)
		if err != nil {
			lastProblem = err
			return false, nil
		}
		missing, err := missingAttributes(namespace, want, have)
		if err != nil {
			return false, err
		}
		if len(missing) > 0 {
			lastProblem = fmt.Errorf("search attributes %s not listed yet", describeAttributes(missing))
			return false, nil
		}
		if _, err := workflows.CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: namespace,
			Query:     query,
		}); err != nil {
			lastProblem = fmt.Errorf("visibility query %q not accepted yet: %w", query, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if IsSearchAttributeTypeConflict(err) || lastProblem == nil {
			return err
		}
		return fmt.Errorf("waiting for search attributes on namespace %s to become usable: %w (last: %v)", namespace, err, lastProblem)
	}
	return nil
}

// probeQuery builds a visibility query that names every attribute, with a
// literal of the right type, so the server has to resolve each of them.
func probeQuery(attributes map[string]enumspb.IndexedValueType) string {
	clauses := make([]string, 0, len(attributes))
	for _, name := range slices.Sorted(maps.Keys(attributes)) {
		clauses = append(clauses, fmt.Sprintf("%s = %s", name, probeLiteral(attributes[name])))
	}
	return strings.Join(clauses, " OR ")
}

func probeLiteral(valueType enumspb.IndexedValueType) string {
	switch valueType {
	case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return "0"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return "false"
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return `"2000-01-01T00:00:00Z"`
	default: // Keyword, Text, KeywordList
		return `"probe"`
	}
}

func describeAttributes(attributes map[string]enumspb.IndexedValueType) string {
	parts := make([]string, 0, len(attributes))
	for _, name := range slices.Sorted(maps.Keys(attributes)) {
		parts = append(parts, name+"("+attributes[name].String()+")")
	}
	return strings.Join(parts, ", ")
}
