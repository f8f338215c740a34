package namespacesetup

import (
	"maps"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

const (
	keyword = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	integer = enumspb.INDEXED_VALUE_TYPE_INT
)

func attributes(pairs ...any) map[string]enumspb.IndexedValueType {
	out := make(map[string]enumspb.IndexedValueType)
	for i := 0; i < len(pairs); i += 2 {
		out[pairs[i].(string)] = pairs[i+1].(enumspb.IndexedValueType)
	}
	return out
}

func TestMissingAttributes(t *testing.T) {
	tests := []struct {
		name         string
		want, have   map[string]enumspb.IndexedValueType
		wantMissing  map[string]enumspb.IndexedValueType
		wantConflict bool
	}{
		{name: "fresh namespace", want: attributes("A", keyword, "B", integer), have: attributes(), wantMissing: attributes("A", keyword, "B", integer)},
		{name: "some present", want: attributes("A", keyword, "B", integer), have: attributes("A", keyword, "Other", keyword), wantMissing: attributes("B", integer)},
		{name: "all present", want: attributes("A", keyword), have: attributes("A", keyword), wantMissing: attributes()},
		{name: "present with another type", want: attributes("A", keyword), have: attributes("A", integer), wantConflict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing, err := missingAttributes("ns", tt.want, tt.have)
			if tt.wantConflict {
				if !IsSearchAttributeTypeConflict(err) {
					t.Fatalf("error = %v, want a type conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(missing, tt.wantMissing) {
				t.Errorf("missing = %v, want %v", missing, tt.wantMissing)
			}
		})
	}
}

func TestProbeQueryNamesEveryAttributeWithATypedLiteral(t *testing.T) {
	got := probeQuery(attributes("Phase", keyword, "Count", integer, "Done", enumspb.INDEXED_VALUE_TYPE_BOOL))
	want := `Count = 0 OR Done = false OR Phase = "probe"`
	if got != want {
		t.Errorf("probeQuery = %s, want %s", got, want)
	}
}
