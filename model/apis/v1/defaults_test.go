package v1

import (
	"testing"
	"time"

	"github.com/millwright/millwright/deploy/crds"
)

func TestNodePoolSetDefaults(t *testing.T) {
	np := aNodePool().withBudget("").withBudgetWindow("@daily", "1h").build()
	np.SetDefaults()
	spec := np.Spec
	if spec.Template.Spec.ExpireAfter != "720h" || spec.Disruption.ConsolidateAfter != "0s" || spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("defaults: expireAfter %q consolidateAfter %q policy %q", spec.Template.Spec.ExpireAfter, spec.Disruption.ConsolidateAfter, spec.Disruption.ConsolidationPolicy)
	}
	if len(spec.Disruption.Budgets) != 1 || spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("a budget without nodes defaults to 10%%, got %+v", spec.Disruption.Budgets)
	}
	// An unset budget list becomes one 10% budget.
	bare := aNodePool().build()
	bare.SetDefaults()
	if len(bare.Spec.Disruption.Budgets) != 1 || bare.Spec.Disruption.Budgets[0].Nodes != "10%" || bare.Spec.Disruption.Budgets[0].Schedule != nil {
		t.Errorf("default budgets %+v, want [{nodes: 10%%}]", bare.Spec.Disruption.Budgets)
	}
	// Set values are kept.
	set := aNodePool().withExpireAfter("Never").withConsolidation(ConsolidationPolicyWhenEmpty, "5m").withBudget("3").build()
	set.SetDefaults()
	if set.Spec.Template.Spec.ExpireAfter != Never || set.Spec.Disruption.ConsolidateAfter != "5m" || set.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmpty || set.Spec.Disruption.Budgets[0].Nodes != "3" {
		t.Errorf("SetDefaults overwrote set values: %+v", set.Spec)
	}
}

func TestEC2NodeClassSetDefaultsRequiresIMDSv2(t *testing.T) {
	nc := anEC2NodeClass().build()
	nc.SetDefaults()
	mo := nc.Spec.MetadataOptions
	if mo == nil || *mo.HTTPTokens != "required" || *mo.HTTPPutResponseHopLimit != 1 || *mo.HTTPEndpoint != "enabled" || *mo.HTTPProtocolIPv6 != "disabled" {
		t.Fatalf("metadata defaults %+v, want IMDSv2 required, hop limit 1, endpoint enabled, IPv6 disabled", mo)
	}
	partial := anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPPutResponseHopLimit: new(int64(2))}).build()
	partial.SetDefaults()
	if *partial.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 || *partial.Spec.MetadataOptions.HTTPTokens != "required" {
		t.Errorf("partial metadata options %+v", partial.Spec.MetadataOptions)
	}
}

// SetDefaults and the CRD's default markers produce the same stored object.
func TestDefaultsMatchCRD(t *testing.T) {
	pools := newAPIServerSim(t, crds.NodePoolFile)
	for name, np := range map[string]*NodePool{
		"nothing set":              aNodePool().build(),
		"budget without nodes":     aNodePool().withBudget("").withBudgetWindow("0 9 * * *", "8h").build(),
		"policy set, after unset":  aNodePool().withConsolidation(ConsolidationPolicyWhenEmpty, "").build(),
		"everything set":           validNodePools()["every field set"],
		"expireAfter only":         aNodePool().withExpireAfter("24h").build(),
		"budgets with two entries": aNodePool().withBudget("1").withBudget("20%").build(),
	} {
		t.Run("NodePool/"+name, func(t *testing.T) {
			stored, errs := pools.decode(toUnstructured(t, np))
			if len(errs) > 0 {
				t.Fatalf("decode: %v", errs)
			}
			defaulted := np.DeepCopy()
			defaulted.SetDefaults()
			if got, want := toUnstructured(t, defaulted)["spec"], stored["spec"]; !equalJSON(t, got, want) {
				t.Errorf("SetDefaults gives\n  %v\nthe API server stores\n  %v", got, want)
			}
		})
	}
	classes := newAPIServerSim(t, crds.EC2NodeClassFile)
	for name, nc := range map[string]*EC2NodeClass{
		"nothing set":     anEC2NodeClass().build(),
		"hop limit set":   anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPPutResponseHopLimit: new(int64(3))}).build(),
		"tokens optional": anEC2NodeClass().withMetadataOptions(MetadataOptions{HTTPTokens: new("optional")}).build(),
		"every field set": validEC2NodeClasses()["every field set"],
	} {
		t.Run("EC2NodeClass/"+name, func(t *testing.T) {
			stored, errs := classes.decode(toUnstructured(t, nc))
			if len(errs) > 0 {
				t.Fatalf("decode: %v", errs)
			}
			defaulted := nc.DeepCopy()
			defaulted.SetDefaults()
			if got, want := toUnstructured(t, defaulted)["spec"], stored["spec"]; !equalJSON(t, got, want) {
				t.Errorf("SetDefaults gives\n  %v\nthe API server stores\n  %v", got, want)
			}
		})
	}
}

func TestDurationText(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		text string
	}{
		{0, "0s"}, {500 * time.Millisecond, "0s"}, {30 * time.Second, "30s"}, {90 * time.Minute, "1h30m"},
		{720 * time.Hour, "720h"}, {time.Hour + time.Second, "1h1s"},
	} {
		if got := DurationOrNeverOf(tc.d); string(got) != tc.text {
			t.Errorf("DurationOrNeverOf(%v) = %q, want %q", tc.d, got, tc.text)
		}
		parsed, never, err := DurationOrNeverOf(tc.d).Parse()
		if err != nil || never || parsed != tc.d.Truncate(time.Second) {
			t.Errorf("%q parses to %v, %v, %v", tc.text, parsed, never, err)
		}
		if got, err := DurationOf(tc.d).Parse(); err != nil || got != tc.d.Truncate(time.Second) {
			t.Errorf("DurationOf(%v).Parse() = %v, %v", tc.d, got, err)
		}
	}
	for _, bad := range []DurationOrNever{"", "1.5h", "500ms", "30d", "-5m", "never", "99999999999h"} {
		if _, _, err := bad.Parse(); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
	if _, never, err := Never.Parse(); !never || err != nil {
		t.Errorf("Never: never=%v err=%v", never, err)
	}
}
