package main

import (
	"strings"
	"testing"
)

// Settings where negative means "off" take a negative number from the
// environment; the others refuse it, and both refuse text.
func TestNumbersFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name, env, value string
		want             string // error substring; "" for none
		got              func(f *flags) float64
		wantValue        float64
	}{
		{name: "negative threshold turns the score off", env: "MILLWRIGHT_CONSOLIDATION_THRESHOLD", value: "-1",
			got: func(f *flags) float64 { return float64(f.consolidationThreshold) }, wantValue: -1},
		{name: "savings fraction", env: "MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION", value: "0.25",
			got: func(f *flags) float64 { return f.consolidationFraction }, wantValue: 0.25},
		{name: "negative savings fraction", env: "MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION", value: "-1",
			got: func(f *flags) float64 { return f.consolidationFraction }, wantValue: -1},
		{name: "repack savings fraction", env: "MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION", value: "0.15",
			got: func(f *flags) float64 { return f.repackFraction }, wantValue: 0.15},
		{name: "negative repack savings fraction", env: "MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION", value: "-1",
			got: func(f *flags) float64 { return f.repackFraction }, wantValue: -1},
		{name: "text is no fraction", env: "MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION", value: "a third",
			want: `$MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION "a third": want a number`},
		{name: "negative rate", env: "MILLWRIGHT_KUBE_QPS", value: "-5",
			want: `$MILLWRIGHT_KUBE_QPS "-5": want a non-negative number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			f := flags{}
			cmd := newCommand()
			var err error
			switch tc.env {
			case "MILLWRIGHT_CONSOLIDATION_THRESHOLD":
				err = signedFromEnv(cmd, "consolidation-threshold", tc.env, &f.consolidationThreshold)
			case "MILLWRIGHT_CONSOLIDATION_SAVINGS_FRACTION":
				err = signedFromEnv(cmd, "consolidation-savings-fraction", tc.env, &f.consolidationFraction)
			case "MILLWRIGHT_CONSOLIDATION_REPACK_SAVINGS_FRACTION":
				err = signedFromEnv(cmd, "consolidation-repack-savings-fraction", tc.env, &f.repackFraction)
			case "MILLWRIGHT_KUBE_QPS":
				err = numberFromEnv(cmd, "kube-qps", tc.env, &f.kubeQPS)
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(&f); got != tc.wantValue {
				t.Errorf("value %v, want %v", got, tc.wantValue)
			}
		})
	}
}
