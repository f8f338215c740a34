package v1

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Every check here has a twin in the CRD (an OpenAPI keyword or a CEL rule
// on the same field) unless its comment says "Go only". The twins are kept in
// step by TestNodePoolCRDAgreesWithValidate and
// TestEC2NodeClassCRDAgreesWithValidate, which run the generated CRD's schema
// and CEL rules, as the API server does, on the same objects.

// Limits of the CRD schema, repeated for the Go checks.
const (
	maxRequirements      = 100
	maxRequirementValues = 1000
	maxRequirementKeyLen = 317
	maxTaints            = 50
	maxTemplateLabels    = 100
	maxBudgets           = 50
	maxBudgetReasons     = 50
	maxLimits            = 64
	maxNodePoolNameLen   = 63
	minValuesMin         = 1
	minValuesMax         = 50
	weightMin, weightMax = 1, 100
)

var (
	labelValueRE       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	integerValueRE     = regexp.MustCompile(`^[0-9]{1,18}$`)
	budgetNodesRE      = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	budgetScheduleRE   = regexp.MustCompile(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`)
	supportedEffects   = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	nodeClassGroups    = []string{Group}
	nodeClassKinds     = []string{"EC2NodeClass"}
	qualifiedNameHint  = "must be a qualified name: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
	labelValueHint     = "must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
	durationOrNeverMsg = "must be a duration in h, m and s units (e.g. 720h, 1h30m, 30s) or Never"
)

// Validate checks the NodePool against every rule the CRD enforces and
// returns a *ValidationError listing all broken rules, or nil. Like the API
// server it judges the object after defaulting; the receiver is not changed.
func (np *NodePool) Validate() error {
	return validationErrorOrNil("NodePool", np.Name, np.ValidationErrors())
}

// ValidateUpdate is Validate plus the rules that compare with the stored
// object (CEL transition rules): nodeClassRef's group and kind are immutable.
func (np *NodePool) ValidateUpdate(old *NodePool) error {
	errs := np.ValidationErrors()
	newRef, oldRef := np.Spec.Template.Spec.NodeClassRef, old.Spec.Template.Spec.NodeClassRef
	if newRef != nil && oldRef != nil {
		refPath := field.NewPath("spec", "template", "spec", "nodeClassRef")
		if newRef.Group != oldRef.Group {
			errs = append(errs, field.Invalid(refPath.Child("group"), newRef.Group, "nodeClassRef.group is immutable"))
		}
		if newRef.Kind != oldRef.Kind {
			errs = append(errs, field.Invalid(refPath.Child("kind"), newRef.Kind, "nodeClassRef.kind is immutable"))
		}
	}
	return validationErrorOrNil("NodePool", np.Name, errs)
}

// ValidationErrors is Validate's list, for callers that merge it with their
// own field errors.
func (np *NodePool) ValidationErrors() field.ErrorList {
	defaulted := np.DeepCopy()
	defaulted.SetDefaults()
	var errs field.ErrorList
	errs = append(errs, validateNodePoolName(defaulted.Name)...)
	errs = append(errs, defaulted.Spec.validate(field.NewPath("spec"))...)
	return errs
}

func validateNodePoolName(name string) field.ErrorList {
	path := field.NewPath("metadata", "name")
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if len(name) > maxNodePoolNameLen {
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("metadata.name must be at most %d characters: it becomes the millwright.dev/nodepool label value", maxNodePoolNameLen))}
	}
	return nil
}

func (spec *NodePoolSpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, spec.Template.validate(path.Child("template"))...)
	errs = append(errs, spec.Disruption.validate(path.Child("disruption"))...)
	errs = append(errs, spec.Limits.validate(path.Child("limits"))...)
	errs = append(errs, (&NodePool{Spec: *spec}).UnsupportedFieldsSet()...)
	if spec.Weight != nil && (*spec.Weight < weightMin || *spec.Weight > weightMax) {
		errs = append(errs, field.Invalid(path.Child("weight"), *spec.Weight, fmt.Sprintf("must be between %d and %d", weightMin, weightMax)))
	}
	if spec.MinNodes != nil {
		minPath := path.Child("minNodes")
		if *spec.MinNodes < 0 {
			errs = append(errs, field.Invalid(minPath, *spec.MinNodes, "must be greater than or equal to 0"))
		}
		if maxNodes, ok := spec.Limits[ResourceNodes]; ok && maxNodes.Cmp(*resource.NewQuantity(int64(*spec.MinNodes), resource.DecimalSI)) < 0 {
			errs = append(errs, field.Invalid(minPath, *spec.MinNodes, fmt.Sprintf("minNodes must not exceed limits.nodes (%s)", maxNodes.String())))
		}
	}
	return errs
}

func (t *NodeClaimTemplate) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateTemplateLabels(path.Child("metadata", "labels"), t.Labels)...)
	errs = append(errs, t.Spec.validate(path.Child("spec"))...)
	return errs
}

func validateTemplateLabels(path *field.Path, labels map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(labels) > maxTemplateLabels {
		errs = append(errs, field.TooMany(path, len(labels), maxTemplateLabels))
	}
	for _, key := range sets.List(sets.KeySet(labels)) {
		keyPath := path.Key(key)
		if len(validation.IsQualifiedName(key)) > 0 {
			errs = append(errs, field.Invalid(keyPath, key, "label key "+qualifiedNameHint))
		}
		if len(validation.IsValidLabelValue(labels[key])) > 0 {
			errs = append(errs, field.Invalid(keyPath, labels[key], "label value "+labelValueHint))
		}
		if reason := RestrictedLabelReason(key); reason != "" {
			errs = append(errs, field.Invalid(keyPath, key, reason))
		}
	}
	return errs
}

func (s *NodeClaimTemplateSpec) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateTaints(path.Child("taints"), s.Taints, nil)...)
	errs = append(errs, validateTaints(path.Child("startupTaints"), s.StartupTaints, s.Taints)...)

	reqPath := path.Child("requirements")
	if s.Requirements == nil {
		errs = append(errs, field.Required(reqPath, "list the requirements (an empty list allows anything the node class can launch)"))
	}
	if len(s.Requirements) > maxRequirements {
		errs = append(errs, field.TooMany(reqPath, len(s.Requirements), maxRequirements))
	}
	for i := range s.Requirements {
		errs = append(errs, s.Requirements[i].validate(reqPath.Index(i))...)
	}

	errs = append(errs, s.NodeClassRef.validate(path.Child("nodeClassRef"))...)

	if s.TerminationGracePeriod != nil {
		tgp := *s.TerminationGracePeriod
		if !terminationGracePeriodRE.MatchString(string(tgp)) {
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriod"), string(tgp), "must be a duration in h, m and s units (e.g. 48h, 1h30m)"))
		} else if _, err := tgp.Parse(); err != nil { // Go only: overflow
			errs = append(errs, field.Invalid(path.Child("terminationGracePeriod"), string(tgp), err.Error()))
		}
	}
	if _, _, err := s.ExpireAfter.Parse(); err != nil {
		errs = append(errs, field.Invalid(path.Child("expireAfter"), string(s.ExpireAfter), durationOrNeverMsg))
	}
	return errs
}

// validateTaints checks one taint list; earlier holds taints of a list
// validated before (taints, when checking startupTaints) that must not be
// repeated.
func validateTaints(path *field.Path, taints, earlier []corev1.Taint) field.ErrorList {
	var errs field.ErrorList
	if len(taints) > maxTaints {
		errs = append(errs, field.TooMany(path, len(taints), maxTaints))
	}
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	earlierPairs := sets.New[keyEffect]()
	for _, t := range earlier {
		earlierPairs.Insert(keyEffect{t.Key, t.Effect})
	}
	seen := sets.New[keyEffect]()
	for i, t := range taints {
		p := path.Index(i)
		if t.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), "taint key "+qualifiedNameHint))
		} else if len(validation.IsQualifiedName(t.Key)) > 0 {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, "taint key "+qualifiedNameHint))
		}
		if len(validation.IsValidLabelValue(t.Value)) > 0 {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "taint value "+labelValueHint))
		}
		if t.Effect == "" {
			errs = append(errs, field.Required(p.Child("effect"), "one of NoSchedule, PreferNoSchedule, NoExecute"))
		} else if !slices.Contains(supportedEffects, t.Effect) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, supportedEffects))
		}
		pair := keyEffect{t.Key, t.Effect}
		switch {
		case seen.Has(pair):
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s:%s", t.Key, t.Effect)))
		case earlierPairs.Has(pair):
			errs = append(errs, field.Invalid(p, fmt.Sprintf("%s:%s", t.Key, t.Effect), "startupTaints must not repeat a key and effect pair of taints"))
		}
		seen.Insert(pair)
	}
	return errs
}

func (r *NodeSelectorRequirementWithMinValues) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	keyPath := path.Child("key")
	switch {
	case r.Key == "":
		errs = append(errs, field.Required(keyPath, "key "+qualifiedNameHint))
	case len(r.Key) > maxRequirementKeyLen:
		errs = append(errs, field.TooLong(keyPath, r.Key, maxRequirementKeyLen))
	case len(validation.IsQualifiedName(r.Key)) > 0:
		errs = append(errs, field.Invalid(keyPath, r.Key, "key "+qualifiedNameHint))
	}
	if reason := RestrictedRequirementReason(r.Key); reason != "" {
		errs = append(errs, field.Invalid(keyPath, r.Key, reason))
	}

	opPath := path.Child("operator")
	if r.Operator == "" {
		errs = append(errs, field.Required(opPath, "one of In, NotIn, Exists, DoesNotExist, Gt, Lt"))
	} else if !slices.Contains(SupportedRequirementOperators, r.Operator) {
		errs = append(errs, field.NotSupported(opPath, r.Operator, SupportedRequirementOperators))
	}

	valuesPath := path.Child("values")
	if len(r.Values) > maxRequirementValues {
		errs = append(errs, field.TooMany(valuesPath, len(r.Values), maxRequirementValues))
	}
	for i, v := range r.Values {
		if len(v) > validation.LabelValueMaxLength {
			errs = append(errs, field.TooLong(valuesPath.Index(i), v, validation.LabelValueMaxLength))
		} else if !labelValueRE.MatchString(v) {
			errs = append(errs, field.Invalid(valuesPath.Index(i), v, "label value "+labelValueHint))
		}
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "requirements with operator 'In' must have a value defined"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 || !integerValueRE.MatchString(r.Values[0]) {
			errs = append(errs, field.Invalid(valuesPath, r.Values, "requirements with operator 'Gt' or 'Lt' must have a single non-negative integer value"))
		}
	}
	if r.Key == LabelCapacityType && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 0 &&
		!slices.ContainsFunc(r.Values, func(v string) bool { return slices.Contains(WellKnownCapacityTypes, v) }) {
		errs = append(errs, field.Invalid(valuesPath, r.Values, "a requirement on millwright.dev/capacity-type with operator 'In' must allow 'spot' or 'on-demand'"))
	}

	if r.MinValues != nil {
		mvPath := path.Child("minValues")
		if *r.MinValues < minValuesMin || *r.MinValues > minValuesMax {
			errs = append(errs, field.Invalid(mvPath, *r.MinValues, fmt.Sprintf("must be between %d and %d", minValuesMin, minValuesMax)))
		}
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) < *r.MinValues {
			errs = append(errs, field.Invalid(mvPath, *r.MinValues, "requirements with 'minValues' must have at least that many values specified in the 'values' field"))
		}
	}
	return errs
}

func (ref *NodeClassReference) validate(path *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(path, "reference the EC2NodeClass: group millwright.dev, kind EC2NodeClass, name")}
	}
	var errs field.ErrorList
	if ref.Group == "" {
		errs = append(errs, field.Required(path.Child("group"), "millwright.dev"))
	} else if !slices.Contains(nodeClassGroups, ref.Group) {
		errs = append(errs, field.NotSupported(path.Child("group"), ref.Group, nodeClassGroups))
	}
	if ref.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), "EC2NodeClass"))
	} else if !slices.Contains(nodeClassKinds, ref.Kind) {
		errs = append(errs, field.NotSupported(path.Child("kind"), ref.Kind, nodeClassKinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "name may not be empty"))
	}
	return errs
}

func (d *Disruption) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, _, err := d.ConsolidateAfter.Parse(); err != nil {
		errs = append(errs, field.Invalid(path.Child("consolidateAfter"), string(d.ConsolidateAfter), durationOrNeverMsg))
	}
	if !slices.Contains(SupportedConsolidationPolicies, d.ConsolidationPolicy) {
		errs = append(errs, field.NotSupported(path.Child("consolidationPolicy"), d.ConsolidationPolicy, SupportedConsolidationPolicies))
	}
	budgetsPath := path.Child("budgets")
	if len(d.Budgets) > maxBudgets {
		errs = append(errs, field.TooMany(budgetsPath, len(d.Budgets), maxBudgets))
	}
	for i := range d.Budgets {
		errs = append(errs, d.Budgets[i].validate(budgetsPath.Index(i))...)
	}
	return errs
}

func (b *Budget) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !budgetNodesRE.MatchString(b.Nodes) {
		errs = append(errs, field.Invalid(path.Child("nodes"), b.Nodes, "must be a node count (\"5\") or a percentage from 0% to 100% (\"10%\")"))
	}
	if (b.Schedule == nil) != (b.Duration == nil) {
		errs = append(errs, field.Invalid(path, budgetWindow(b), "'schedule' must be set with 'duration'"))
	}
	if b.Schedule != nil {
		schedPath := path.Child("schedule")
		if !budgetScheduleRE.MatchString(*b.Schedule) {
			errs = append(errs, field.Invalid(schedPath, *b.Schedule, "must be a cron schedule of five fields or a macro such as @daily"))
		} else if _, err := cron.ParseStandard(*b.Schedule); err != nil {
			// Go only: CEL cannot parse cron. The controller reports the
			// same error on the ValidationSucceeded condition.
			errs = append(errs, field.Invalid(schedPath, *b.Schedule, "cron schedule does not parse: "+err.Error()))
		}
	}
	if b.Duration != nil && !budgetDurationRE.MatchString(string(*b.Duration)) {
		errs = append(errs, field.Invalid(path.Child("duration"), string(*b.Duration), "must be whole hours and minutes (e.g. 8h, 30m, 1h30m): cron has no seconds"))
	}
	reasonsPath := path.Child("reasons")
	if len(b.Reasons) > maxBudgetReasons {
		errs = append(errs, field.TooMany(reasonsPath, len(b.Reasons), maxBudgetReasons))
	}
	seen := sets.New[DisruptionReason]()
	for i, r := range b.Reasons {
		if !slices.Contains(SupportedDisruptionReasons, r) {
			errs = append(errs, field.NotSupported(reasonsPath.Index(i), r, SupportedDisruptionReasons))
		}
		if seen.Has(r) {
			errs = append(errs, field.Duplicate(reasonsPath.Index(i), r))
		}
		seen.Insert(r)
	}
	return errs
}

func budgetWindow(b *Budget) string {
	switch {
	case b.Schedule != nil:
		return "schedule " + *b.Schedule + " without duration"
	case b.Duration != nil:
		return "duration " + string(*b.Duration) + " without schedule"
	}
	return ""
}

func (l Limits) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(l) > maxLimits {
		errs = append(errs, field.TooMany(path, len(l), maxLimits))
	}
	for _, name := range sets.List(sets.KeySet(l)) {
		if q := l[name]; q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Key(string(name)), q.String(), "limits must not be negative"))
		}
	}
	return errs
}
