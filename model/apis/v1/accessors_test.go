package v1

import (
	"math"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestNodePoolDurations(t *testing.T) {
	for _, tc := range []struct {
		name               string
		pool               *NodePool
		expire             time.Duration
		expireNever        bool
		consolidate        time.Duration
		consolidateNever   bool
		gracePeriod        time.Duration
		gracePeriodPresent bool
	}{
		{name: "defaults", pool: aNodePool().build(), expire: 720 * time.Hour, consolidate: 0},
		{name: "set", pool: aNodePool().withExpireAfter("24h").withConsolidation(ConsolidationPolicyWhenEmpty, "1h30m").withTerminationGracePeriod("48h").build(),
			expire: 24 * time.Hour, consolidate: 90 * time.Minute, gracePeriod: 48 * time.Hour, gracePeriodPresent: true},
		{name: "Never", pool: aNodePool().withExpireAfter(Never).withConsolidation("", Never).build(), expireNever: true, consolidateNever: true},
		// Unvalidated garbage switches the timers off rather than firing them.
		{name: "unreadable", pool: aNodePool().withExpireAfter("soon").withConsolidation("", "1.5h").withTerminationGracePeriod("a while").build(), expireNever: true, consolidateNever: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, never := tc.pool.ExpireAfterDuration(); d != tc.expire || never != tc.expireNever {
				t.Errorf("ExpireAfterDuration() = %v, %v; want %v, %v", d, never, tc.expire, tc.expireNever)
			}
			if d, never := tc.pool.ConsolidateAfterDuration(); d != tc.consolidate || never != tc.consolidateNever {
				t.Errorf("ConsolidateAfterDuration() = %v, %v; want %v, %v", d, never, tc.consolidate, tc.consolidateNever)
			}
			if d, ok := tc.pool.TerminationGracePeriodDuration(); d != tc.gracePeriod || ok != tc.gracePeriodPresent {
				t.Errorf("TerminationGracePeriodDuration() = %v, %v; want %v, %v", d, ok, tc.gracePeriod, tc.gracePeriodPresent)
			}
		})
	}
}

func TestNodePoolScalars(t *testing.T) {
	bare := aNodePool().build()
	if bare.WeightOrZero() != 0 || bare.MinNodesOrZero() != 0 || bare.ConsolidationPolicyOrDefault() != ConsolidationPolicyWhenEmptyOrUnderutilized || bare.NodeClassName() != "default" {
		t.Errorf("bare pool: weight %d minNodes %d policy %s class %q", bare.WeightOrZero(), bare.MinNodesOrZero(), bare.ConsolidationPolicyOrDefault(), bare.NodeClassName())
	}
	if _, ok := bare.MaxNodes(); ok {
		t.Errorf("bare pool has no node limit")
	}
	set := aNodePool().withWeight(50).withMinNodes(2).withLimit(ResourceNodes, "10").build()
	if n, ok := set.MaxNodes(); !ok || n != 10 || set.WeightOrZero() != 50 || set.MinNodesOrZero() != 2 {
		t.Errorf("set pool: max %d %v weight %d min %d", n, ok, set.WeightOrZero(), set.MinNodesOrZero())
	}
	if (&NodePool{}).NodeClassName() != "" {
		t.Errorf("no nodeClassRef must give an empty name")
	}
}

func TestLimitsExceededBy(t *testing.T) {
	limits := aNodePool().withLimit(corev1.ResourceCPU, "100").withLimit(corev1.ResourceMemory, "400Gi").withLimit(ResourceNodes, "5").build().Spec.Limits
	usage := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100"),   // at the limit: fine
		corev1.ResourceMemory: resource.MustParse("401Gi"), // over
		ResourceNodes:         resource.MustParse("6"),     // over
		"nvidia.com/gpu":      resource.MustParse("64"),    // no limit
	}
	if got, want := limits.ExceededBy(usage), []corev1.ResourceName{corev1.ResourceMemory, ResourceNodes}; !slices.Equal(got, want) {
		t.Errorf("ExceededBy = %v, want %v", got, want)
	}
	if got := Limits(nil).ExceededBy(usage); got != nil {
		t.Errorf("no limits, got %v", got)
	}
}

func TestBudgetWindows(t *testing.T) {
	// Monday 2026-03-02; budgets are evaluated in UTC.
	at := func(hhmm string) time.Time {
		ts, err := time.Parse("2006-01-02 15:04", "2026-03-02 "+hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	workHours := aNodePool().withBudget("0").withBudgetWindow("0 9 * * mon-fri", "8h").build().Spec.Disruption.Budgets[0]
	for _, tc := range []struct {
		at     string
		active bool
	}{
		// The window is [09:00, 17:00): open at the hit, closed duration later.
		{"08:59", false}, {"09:00", true}, {"12:00", true}, {"16:59", true}, {"17:00", false},
	} {
		if active, err := workHours.IsActive(at(tc.at)); err != nil || active != tc.active {
			t.Errorf("weekday 09:00+8h at %s: active %v (%v), want %v", tc.at, active, err, tc.active)
		}
	}
	always := Budget{Nodes: "10%"}
	if active, err := always.IsActive(at("03:00")); !active || err != nil {
		t.Errorf("a budget without schedule is always active")
	}
	broken := Budget{Nodes: "1", Schedule: new("every day at nine am"), Duration: new(Duration("1h"))}
	if _, err := broken.IsActive(at("09:00")); err == nil {
		t.Errorf("an unparsable schedule must be an error")
	}
}

func TestAllowedDisruptions(t *testing.T) {
	monday10 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(monday10)
	for _, tc := range []struct {
		name    string
		pool    *NodePool
		nodes   int
		reason  DisruptionReason
		want    int
		wantErr bool
	}{
		{name: "default 10% rounds up", pool: aNodePool().build(), nodes: 15, reason: DisruptionReasonEmpty, want: 2},
		{name: "default 10% of one node", pool: aNodePool().build(), nodes: 1, reason: DisruptionReasonDrifted, want: 1},
		{name: "count", pool: aNodePool().withBudget("3").build(), nodes: 100, reason: DisruptionReasonEmpty, want: 3},
		{name: "most restrictive wins", pool: aNodePool().withBudget("50%").withBudget("4").build(), nodes: 20, reason: DisruptionReasonUnderutilized, want: 4},
		{name: "budget for another reason ignored", pool: aNodePool().withBudget("0", DisruptionReasonDrifted).build(), nodes: 20, reason: DisruptionReasonEmpty, want: math.MaxInt32},
		{name: "budget for this reason applies", pool: aNodePool().withBudget("0", DisruptionReasonDrifted).build(), nodes: 20, reason: DisruptionReasonDrifted, want: 0},
		{name: "inside a zero window", pool: aNodePool().withBudget("10%").withBudget("0").withBudgetWindow("0 9 * * mon-fri", "8h").build(), nodes: 20, reason: DisruptionReasonEmpty, want: 0},
		{name: "outside a zero window", pool: aNodePool().withBudget("10%").withBudget("0").withBudgetWindow("0 18 * * *", "1h").build(), nodes: 20, reason: DisruptionReasonEmpty, want: 2},
		{name: "unreadable budget fails closed", pool: aNodePool().withBudget("10").withBudgetWindow("every day at nine am", "1h").build(), nodes: 20, reason: DisruptionReasonEmpty, want: 0, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.pool.AllowedDisruptions(clk, tc.nodes, tc.reason)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("AllowedDisruptions = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestEC2NodeClassAccessors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		class  *EC2NodeClass
		family string
		alias  string
		imdsV2 bool
	}{
		{name: "alias", class: anEC2NodeClass().build(), family: AMIFamilyAL2023, alias: "al2023@latest", imdsV2: true},
		{name: "bottlerocket alias", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{Alias: "bottlerocket@v1.20.0"}).build(), family: AMIFamilyBottlerocket, alias: "bottlerocket@v1.20.0", imdsV2: true},
		{name: "explicit family wins", class: anEC2NodeClass().withAMIFamily(AMIFamilyCustom).build(), family: AMIFamilyCustom, alias: "al2023@latest", imdsV2: true},
		{name: "no alias", class: anEC2NodeClass().withAMITerms(AMISelectorTerm{ID: "ami-0123"}).withAMIFamily(AMIFamilyAL2).build(), family: AMIFamilyAL2, imdsV2: true},
		{name: "IMDSv1 allowed", class: anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPTokens: new(MetadataTokensOptional)}).build(), family: AMIFamilyAL2023, alias: "al2023@latest", imdsV2: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.class.AMIFamily(); got != tc.family {
				t.Errorf("AMIFamily() = %q, want %q", got, tc.family)
			}
			family, version, ok := tc.class.Alias()
			if got := family + "@" + version; ok != (tc.alias != "") || (ok && got != tc.alias) {
				t.Errorf("Alias() = %q, %v; want %q", got, ok, tc.alias)
			}
			if got := tc.class.IMDSv2Required(); got != tc.imdsV2 {
				t.Errorf("IMDSv2Required() = %v, want %v", got, tc.imdsV2)
			}
		})
	}
	if got := RestrictedTagKeys(); !slices.Contains(got, TagNodeClaim) || !slices.Contains(got, TagNodePool) {
		t.Errorf("RestrictedTagKeys() = %v", got)
	}
}

func TestRestrictedLabelReason(t *testing.T) {
	for key, restricted := range map[string]bool{
		"example.com/team":             false,
		LabelCapacityType:              false,
		LabelInstanceFamily:            false,
		corev1.LabelTopologyZone:       false,
		LabelNodePool:                  true,
		corev1.LabelHostname:           true,
		"millwright.dev/anything":      true,
		"sub.millwright.dev/x":         true,
		"notmillwright.dev/x":          false,
		"millwright.dev":               false, // no prefix: the name is "millwright.dev", not a domain
		"example.com/millwright.dev/x": false,
		"team":                         false,
	} {
		if got := RestrictedLabelReason(key) != ""; got != restricted {
			t.Errorf("RestrictedLabelReason(%q) restricted=%v, want %v", key, got, restricted)
		}
	}
}
