package ec2query

import (
	"net/url"
	"testing"
)

func TestMatchWildcard(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"m5.large", "m5.large", true},
		{"m5.*", "m5.large", true},
		{"m5.*", "m5a.large", false},
		{"m?.large", "m6.large", true},
		{"amazon-eks-node-al2023-x86_64-standard-1.37-*", "amazon-eks-node-al2023-x86_64-standard-1.37-v20261101", true},
		{"*/path/*", "a/path/b", true},
		{"[abc]", "[abc]", true},
		{"\\*literal", "*literal", true},
		{"\\*literal", "xliteral", false},
		{"*", "", true},
		{"?", "", false},
	}
	for _, tc := range tests {
		if got := MatchWildcard(tc.pattern, tc.s); got != tc.want {
			t.Errorf("MatchWildcard(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestParamsNestedLists(t *testing.T) {
	p := NewParams(url.Values{
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName": {"lt"},
		"LaunchTemplateConfigs.1.Overrides.2.InstanceType":                       {"m5.xlarge"},
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType":                       {"m5.large"},
		"LaunchTemplateConfigs.1.Overrides.10.InstanceType":                      {"m5.24xlarge"},
		"Filter.1.Name":    {"tag:team"},
		"Filter.1.Value.1": {"a"},
		"Filter.1.Value.2": {"b"},
		"ClientToken":      {"tok"},
	})
	configs := p.Members("LaunchTemplateConfigs")
	if len(configs) != 1 || configs[0].Sub("LaunchTemplateSpecification").String("LaunchTemplateName") != "lt" {
		t.Fatalf("configs %+v", configs)
	}
	var types []string
	for _, o := range configs[0].Members("Overrides") {
		types = append(types, o.String("InstanceType"))
	}
	if len(types) != 3 || types[0] != "m5.large" || types[1] != "m5.xlarge" || types[2] != "m5.24xlarge" {
		t.Errorf("overrides in numeric order: %v", types)
	}
	f := p.Filters()
	if len(f) != 1 || f[0].Name != "tag:team" || len(f[0].Values) != 2 || !f[0].MatchAny("b") {
		t.Errorf("filters %+v", f)
	}
	if a, b := p.Canonical("ClientToken"), NewParams(url.Values{"Filter.1.Name": {"tag:team"}}).Canonical(); a == b {
		t.Error("different parameters have the same canonical form")
	}
}

func TestPageTokens(t *testing.T) {
	start, end, next, err := Page("DescribeInstances", 12, 5, "")
	if err != nil || start != 0 || end != 5 || next == "" {
		t.Fatalf("first page %d..%d %q %v", start, end, next, err)
	}
	start, end, next2, err := Page("DescribeInstances", 12, 5, next)
	if err != nil || start != 5 || end != 10 || next2 == "" {
		t.Fatalf("second page %d..%d %q %v", start, end, next2, err)
	}
	if start, end, last, err := Page("DescribeInstances", 12, 5, next2); err != nil || start != 10 || end != 12 || last != "" {
		t.Fatalf("last page %d..%d %q %v", start, end, last, err)
	}
	if _, _, _, err := Page("DescribeSubnets", 12, 5, next); err == nil || AsError(err).Code != "InvalidPaginationToken" {
		t.Errorf("a token used on another action: %v", err)
	}
}
