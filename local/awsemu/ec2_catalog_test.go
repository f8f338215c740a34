package awsemu

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/millwright/millwright/model/catalog"
)

func TestDescribeAvailabilityZones(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*Options)
		input     *ec2.DescribeAvailabilityZonesInput
		want      []string
		wantIDs   []string
	}{
		{name: "default is the catalog's first three zones", input: &ec2.DescribeAvailabilityZonesInput{},
			want: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, wantIDs: []string{"use1-az1", "use1-az2", "use1-az3"}},
		{name: "configured subset", configure: func(o *Options) { o.Zones = []string{"us-east-1b", "us-east-1f"} },
			input: &ec2.DescribeAvailabilityZonesInput{}, want: []string{"us-east-1b", "us-east-1f"}, wantIDs: []string{"use1-az2", "use1-az5"}},
		{name: "zone-name filter", input: &ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{{Name: aws.String("zone-name"), Values: []string{"us-east-1c"}}}},
			want: []string{"us-east-1c"}, wantIDs: []string{"use1-az3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var configure []func(*Options)
			if tc.configure != nil {
				configure = append(configure, tc.configure)
			}
			h := newHarness(t, configure...)
			out, err := h.ec2.DescribeAvailabilityZones(h.ctx, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			var names, ids []string
			for _, z := range out.AvailabilityZones {
				names = append(names, aws.ToString(z.ZoneName))
				ids = append(ids, aws.ToString(z.ZoneId))
				if z.State != ec2types.AvailabilityZoneStateAvailable || aws.ToString(z.RegionName) != "us-east-1" {
					t.Errorf("zone %s: state %q region %q", aws.ToString(z.ZoneName), z.State, aws.ToString(z.RegionName))
				}
			}
			if !equalStrings(names, tc.want) || !equalStrings(ids, tc.wantIDs) {
				t.Errorf("zones %v %v, want %v %v", names, ids, tc.want, tc.wantIDs)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDescribeInstanceTypesPaginatorCoversTheCatalog(t *testing.T) {
	h := newHarness(t)
	cat := catalog.MustDefault()
	pages, seen := 0, map[string]bool{}
	p := ec2.NewDescribeInstanceTypesPaginator(h.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for p.HasMorePages() {
		out, err := p.NextPage(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(out.InstanceTypes) > 100 {
			t.Fatalf("page of %d > MaxResults", len(out.InstanceTypes))
		}
		for _, it := range out.InstanceTypes {
			name := string(it.InstanceType)
			if seen[name] {
				t.Fatalf("%s on two pages", name)
			}
			seen[name] = true
		}
	}
	if len(seen) != len(cat.InstanceTypes) || pages != (len(cat.InstanceTypes)+99)/100 {
		t.Errorf("saw %d types on %d pages, want %d types", len(seen), pages, len(cat.InstanceTypes))
	}
}

func TestDescribeInstanceTypesShapes(t *testing.T) {
	h := newHarness(t)
	out, err := h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large", "m6g.xlarge", "g5.xlarge", "inf2.xlarge", "m5.metal"},
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		byName[string(it.InstanceType)] = it
	}
	cat := catalog.MustDefault()
	for name, info := range byName {
		spec, _ := cat.Get(name)
		if got := aws.ToInt32(info.VCpuInfo.DefaultVCpus); int(got) != spec.VCPU {
			t.Errorf("%s vcpus %d, want %d", name, got, spec.VCPU)
		}
		if got := aws.ToInt64(info.MemoryInfo.SizeInMiB); got != spec.MemoryMiB {
			t.Errorf("%s memory %d, want %d", name, got, spec.MemoryMiB)
		}
		if got := aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces); int(got) != spec.ENIs {
			t.Errorf("%s ENIs %d, want %d", name, got, spec.ENIs)
		}
		if got := aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface); int(got) != spec.IPv4PerENI {
			t.Errorf("%s IPv4 per ENI %d, want %d", name, got, spec.IPv4PerENI)
		}
		if got := aws.ToBool(info.BareMetal); got != spec.BareMetal {
			t.Errorf("%s bare metal %v, want %v", name, got, spec.BareMetal)
		}
		if len(info.SupportedUsageClasses) != 2 {
			t.Errorf("%s usage classes %v", name, info.SupportedUsageClasses)
		}
	}
	if arch := byName["m6g.xlarge"].ProcessorInfo.SupportedArchitectures; len(arch) != 1 || arch[0] != ec2types.ArchitectureTypeArm64 {
		t.Errorf("m6g.xlarge architectures %v", arch)
	}
	if arch := byName["m5.large"].ProcessorInfo.SupportedArchitectures; len(arch) != 1 || arch[0] != ec2types.ArchitectureTypeX8664 {
		t.Errorf("m5.large architectures %v", arch)
	}
	if hv := byName["m5.large"].Hypervisor; hv != ec2types.InstanceTypeHypervisorNitro {
		t.Errorf("m5.large hypervisor %q", hv)
	}
	if g := byName["g5.xlarge"].GpuInfo; g == nil || len(g.Gpus) != 1 || aws.ToInt32(g.Gpus[0].Count) != 1 || aws.ToString(g.Gpus[0].Manufacturer) != "NVIDIA" {
		t.Errorf("g5.xlarge GPU info %+v", g)
	}
	if n := byName["inf2.xlarge"].NeuronInfo; n == nil || len(n.NeuronDevices) != 1 || aws.ToInt32(n.NeuronDevices[0].Count) != 1 {
		t.Errorf("inf2.xlarge neuron info %+v", n)
	}
}

func TestDescribeInstanceTypesFilters(t *testing.T) {
	h := newHarness(t)
	cat := catalog.MustDefault()
	want := 0
	for _, it := range cat.InstanceTypes {
		if it.Arch == "arm64" && it.VCPU == 4 {
			want++
		}
	}
	got := 0
	p := ec2.NewDescribeInstanceTypesPaginator(h.ec2, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{"arm64"}},
		{Name: aws.String("vcpu-info.default-vcpus"), Values: []string{"4"}},
	}})
	for p.HasMorePages() {
		out, err := p.NextPage(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.InstanceTypes {
			if aws.ToInt32(it.VCpuInfo.DefaultVCpus) != 4 || it.ProcessorInfo.SupportedArchitectures[0] != ec2types.ArchitectureTypeArm64 {
				t.Errorf("%s does not match the filters", it.InstanceType)
			}
			got++
		}
	}
	if got != want || want == 0 {
		t.Errorf("got %d arm64 4-vCPU types, want %d", got, want)
	}

	_, err := h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "nope.huge"}})
	if code := apiErrorCode(t, err); code != "InvalidInstanceType" {
		t.Errorf("unknown type: error code %q, want InvalidInstanceType", code)
	}
	_, err = h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{{Name: aws.String("no-such-filter"), Values: []string{"x"}}}})
	if code := apiErrorCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("unknown filter: error code %q, want InvalidParameterValue", code)
	}
	_, err = h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(1000)})
	if code := apiErrorCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("MaxResults 1000: error code %q, want InvalidParameterValue", code)
	}
}

func TestDescribeInstanceTypeOfferings(t *testing.T) {
	h := newHarness(t)
	cat := catalog.MustDefault()
	tests := []struct {
		name  string
		input *ec2.DescribeInstanceTypeOfferingsInput
		want  int
	}{
		{name: "region", input: &ec2.DescribeInstanceTypeOfferingsInput{}, want: len(cat.InstanceTypes)},
		{name: "every type in every zone", input: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(500)},
			want: 3 * len(cat.InstanceTypes)},
		{name: "filtered by type and zone", input: &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone, Filters: []ec2types.Filter{
			{Name: aws.String("instance-type"), Values: []string{"m5.*"}},
			{Name: aws.String("location"), Values: []string{"us-east-1a", "us-east-1b"}},
		}}, want: 2 * countPrefix(cat, "m5.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := 0
			p := ec2.NewDescribeInstanceTypeOfferingsPaginator(h.ec2, tc.input)
			for p.HasMorePages() {
				out, err := p.NextPage(h.ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out.InstanceTypeOfferings {
					if tc.input.LocationType != "" && o.LocationType != tc.input.LocationType {
						t.Errorf("offering location type %q", o.LocationType)
					}
				}
				got += len(out.InstanceTypeOfferings)
			}
			if got != tc.want {
				t.Errorf("got %d offerings, want %d", got, tc.want)
			}
		})
	}
}

func countPrefix(cat *catalog.Catalog, prefix string) int {
	n := 0
	for _, it := range cat.InstanceTypes {
		if len(it.Name) >= len(prefix) && it.Name[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

func TestSpotPricesAreDeterministicAndBelowOnDemand(t *testing.T) {
	first, second := newHarness(t), newHarness(t)
	cat := catalog.MustDefault()
	prices := func(h *harness) map[string]float64 {
		out := map[string]float64{}
		p := ec2.NewDescribeSpotPriceHistoryPaginator(h.ec2, &ec2.DescribeSpotPriceHistoryInput{
			ProductDescriptions: []string{"Linux/UNIX"},
			MaxResults:          aws.Int32(400),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(h.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range page.SpotPriceHistory {
				v, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
				if err != nil {
					t.Fatal(err)
				}
				out[string(sp.InstanceType)+"/"+aws.ToString(sp.AvailabilityZone)] = v
			}
		}
		return out
	}
	a, b := prices(first), prices(second)
	if len(a) != 3*len(cat.InstanceTypes) {
		t.Fatalf("got %d prices, want one per type and zone (%d)", len(a), 3*len(cat.InstanceTypes))
	}
	differsByZone := false
	for key, price := range a {
		if b[key] != price {
			t.Fatalf("%s: %v in one emulator, %v in another", key, price, b[key])
		}
		name := key[:len(key)-len("/us-east-1a")]
		spec, _ := cat.Get(name)
		if price <= 0 || price > spec.OnDemandPrice*0.7+0.0001 || price < spec.OnDemandPrice*0.3-0.0001 {
			t.Errorf("%s spot %v is not 30–70%% of on-demand %v", key, price, spec.OnDemandPrice)
		}
		if a[name+"/us-east-1a"] != a[name+"/us-east-1b"] {
			differsByZone = true
		}
	}
	if !differsByZone {
		t.Error("spot prices are the same in every zone")
	}

	out, err := first.ec2.DescribeSpotPriceHistory(first.ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:    []ec2types.InstanceType{"m5.large"},
		AvailabilityZone: aws.String("us-east-1b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SpotPriceHistory) != 2 { // Linux/UNIX and Linux/UNIX (Amazon VPC)
		t.Errorf("m5.large in us-east-1b: %d entries, want 2", len(out.SpotPriceHistory))
	}
	for _, sp := range out.SpotPriceHistory {
		if sp.Timestamp == nil || string(sp.InstanceType) != "m5.large" || aws.ToString(sp.AvailabilityZone) != "us-east-1b" {
			t.Errorf("unexpected entry %+v", sp)
		}
	}
}
