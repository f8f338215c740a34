package cloud

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/model/catalog"
)

// Every type the emulator describes must come back with the catalog's
// shape: the EC2 → catalog conversion is the inverse of the emulator's.
func TestSpecFromEC2MatchesCatalog(t *testing.T) {
	f := newFixture(t)
	pages := ec2.NewDescribeInstanceTypesPaginator(f.ec2, &ec2.DescribeInstanceTypesInput{})
	seen := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for i := range page.InstanceTypes {
			got, ok := SpecFromEC2(&page.InstanceTypes[i])
			if !ok {
				t.Errorf("%s: not usable", page.InstanceTypes[i].InstanceType)
				continue
			}
			seen++
			want := catalogSpec(t, got.Name)
			want.OnDemandPrice = 0
			if want.GPU.Count == 0 {
				// EC2 describes no GPU for fractional-GPU types (g6f); the
				// catalog names the device with a zero count.
				want.GPU = catalog.GPU{}
			}
			// EC2 gives some of Karpenter's labels; the catalog fills the rest.
			FillLabels(&got, want)
			if len(want.ExtraLabels) == 0 {
				got.ExtraLabels = nil // a type Karpenter's reference does not list
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got %+v\nwant %+v", got.Name, got, want)
			}
		}
	}
	if want := len(catalog.MustDefault().InstanceTypes); seen != want {
		t.Fatalf("converted %d types, the catalog has %d", seen, want)
	}
}

func TestListFromEmulator(t *testing.T) {
	f := newFixture(t)
	types, err := f.provider.InstanceTypes.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := len(catalog.MustDefault().InstanceTypes); len(types) != want {
		t.Fatalf("listed %d types, want %d", len(types), want)
	}
	byName := map[string]*catalog.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	cases := []string{"m5.large", "m6g.xlarge", "g4dn.xlarge", "c7i.48xlarge"}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			it := byName[name]
			if it == nil {
				t.Fatalf("%s missing", name)
			}
			spec := catalogSpec(t, name)
			want := spec.InstanceType(nil)
			if !reflect.DeepEqual(it.Labels, want.Labels) || it.Capacity != want.Capacity || it.Allocatable != want.Allocatable {
				t.Errorf("shape differs from the catalog's:\n got %v %v %v\nwant %v %v %v", it.Labels, it.Capacity, it.Allocatable, want.Labels, want.Capacity, want.Allocatable)
			}
			// The emulator offers every type in its three zones, spot and
			// on-demand; on-demand is the catalog's price (no Pricing API
			// here), spot a zone-dependent discount.
			if len(it.Offerings) != 6 {
				t.Fatalf("offerings = %v, want 3 zones × 2 capacity types", it.Offerings)
			}
			for i, o := range it.Offerings {
				if !o.Available {
					t.Errorf("offering %v unavailable", o)
				}
				if i > 0 && o.Price < it.Offerings[i-1].Price {
					t.Errorf("offerings not cheapest first: %v", it.Offerings)
				}
				switch o.CapacityType {
				case activities.CapacityTypeOnDemand:
					if o.Price != spec.OnDemandPrice {
						t.Errorf("on-demand price %v in %s, want the catalog's %v", o.Price, o.Zone, spec.OnDemandPrice)
					}
				case activities.CapacityTypeSpot:
					if o.Price <= 0 || o.Price >= spec.OnDemandPrice {
						t.Errorf("spot price %v in %s, want below on-demand %v", o.Price, o.Zone, spec.OnDemandPrice)
					}
				}
			}
		})
	}
}

func TestListInZones(t *testing.T) {
	f := newFixture(t)
	types, err := f.provider.InstanceTypes.ListInZones(context.Background(), []string{"us-east-1b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.Zone != "us-east-1b" {
				t.Fatalf("%s has an offering in %s", it.Name, o.Zone)
			}
		}
	}
	none, err := f.provider.InstanceTypes.ListInZones(context.Background(), []string{"us-west-2a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(none) != 0 {
		t.Fatalf("zone with no offerings listed %d types", len(none))
	}
}

func TestListMarksUnavailableOfferingsUntilTheyExpire(t *testing.T) {
	f := newFixture(t)
	key := activities.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: activities.CapacityTypeSpot}
	f.provider.Unavailable.MarkUnavailable(key, "InsufficientInstanceCapacity")
	available := func() bool {
		types, err := f.provider.InstanceTypes.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			for _, o := range it.Offerings {
				if it.Name == key.InstanceType && o.Zone == key.Zone && o.CapacityType == key.CapacityType {
					return o.Available
				}
			}
		}
		t.Fatalf("offering %s not listed", key)
		return false
	}
	if available() {
		t.Fatal("offering reported out of capacity is listed available")
	}
	f.clock.Step(activities.UnavailableOfferingTTL + time.Second)
	if !available() {
		t.Fatal("offering still unavailable after the TTL")
	}
}

// pricingServer answers GetProducts as the Pricing API (JSON 1.1) does, with
// one page per element of pages, or fails every call when status is set.
type pricingServer struct {
	pages  [][]string
	status int
	calls  atomic.Int32
}

func (s *pricingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	if target := r.Header.Get("X-Amz-Target"); target != "AWSPriceListService.GetProducts" {
		http.Error(w, "unexpected target "+target, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if s.status != 0 {
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, `{"__type":"InternalErrorException","message":"pricing is down"}`)
		return
	}
	page := 0
	if i := strings.Index(string(body), `"NextToken":"`); i >= 0 {
		_, _ = fmt.Sscanf(string(body[i+len(`"NextToken":"`):]), "page%d", &page)
	}
	next := ""
	if page+1 < len(s.pages) {
		next = fmt.Sprintf(`,"NextToken":"page%d"`, page+1)
	}
	quoted := make([]string, len(s.pages[page]))
	for i, doc := range s.pages[page] {
		quoted[i] = fmt.Sprintf("%q", doc)
	}
	_, _ = fmt.Fprintf(w, `{"FormatVersion":"aws_v1","PriceList":[%s]%s}`, strings.Join(quoted, ","), next)
}

// priceDocument is one PriceList entry as the Pricing API writes it.
func priceDocument(instanceType, usd string) string {
	return `{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"` + instanceType +
		`","operatingSystem":"Linux","regionCode":"us-east-1"},"sku":"SKU` + instanceType + `"},` +
		`"serviceCode":"AmazonEC2","terms":{"OnDemand":{"SKU.JRTCKXETXF":{"priceDimensions":{"SKU.JRTCKXETXF.6YS6EN2CT7":` +
		`{"unit":"Hrs","endRange":"Inf","description":"$` + usd + ` per On Demand Linux","pricePerUnit":{"USD":"` + usd + `"}}},` +
		`"sku":"SKU","effectiveDate":"2026-11-01T00:00:00Z","offerTermCode":"JRTCKXETXF","termAttributes":{}}}},"version":"20261101","publicationDate":"2026-11-01T00:00:00Z"}`
}

func TestOnDemandPrices(t *testing.T) {
	catalogPrice := catalogSpec(t, "m5.large").OnDemandPrice
	cases := []struct {
		name   string
		server *pricingServer // nil: Pricing API off
		want   map[string]float64
	}{
		{
			name: "pricing off: the catalog's prices",
			want: map[string]float64{"m5.large": catalogPrice},
		},
		{
			name: "Pricing API prices win, over several pages; unpriced types keep the catalog's",
			server: &pricingServer{pages: [][]string{
				{priceDocument("m5.large", "0.1234")},
				{priceDocument("m5.xlarge", "0.5")},
			}},
			want: map[string]float64{"m5.large": 0.1234, "m5.xlarge": 0.5, "c5.large": catalogSpec(t, "c5.large").OnDemandPrice},
		},
		{
			name:   "Pricing API failing: the catalog's prices",
			server: &pricingServer{status: http.StatusInternalServerError},
			want:   map[string]float64{"m5.large": catalogPrice},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Region: testRegion, Credentials: staticCredentials(), RetryMaxBackoff: time.Millisecond}
			if tc.server != nil {
				server := httptest.NewServer(tc.server)
				t.Cleanup(server.Close)
				cfg.Pricing, cfg.PricingEndpoint = true, server.URL
			}
			pricingClient, err := NewPricingClient(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (pricingClient == nil) != (tc.server == nil) {
				t.Fatalf("NewPricingClient = %v with Pricing %v", pricingClient, cfg.Pricing)
			}
			f := newFixture(t, withProviderOptions(func(o *Options) { o.Pricing = pricingClient }))
			got := onDemandPrices(t, f)
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s on-demand = %v, want %v", name, got[name], want)
				}
			}
			if tc.server == nil {
				return
			}
			// Cached: a second listing does not ask again until the TTL.
			calls := tc.server.calls.Load()
			onDemandPrices(t, f)
			if again := tc.server.calls.Load(); again != calls {
				t.Fatalf("Pricing API called again within the TTL (%d → %d calls)", calls, again)
			}
			f.clock.Step(DefaultOnDemandPricesTTL + time.Second)
			onDemandPrices(t, f)
			if tc.server.calls.Load() == calls {
				t.Fatal("Pricing API not asked again after the TTL")
			}
		})
	}
}

func onDemandPrices(t *testing.T, f *fixture) map[string]float64 {
	t.Helper()
	types, err := f.provider.InstanceTypes.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == activities.CapacityTypeOnDemand {
				out[it.Name] = o.Price
			}
		}
	}
	return out
}

func TestParsePricingProduct(t *testing.T) {
	cases := []struct {
		name      string
		doc       string
		wantType  string
		wantPrice float64
		wantOK    bool
		wantErr   bool
	}{
		{name: "hourly price", doc: priceDocument("m5.large", "0.096"), wantType: "m5.large", wantPrice: 0.096, wantOK: true},
		{name: "zero price is no price", doc: priceDocument("m1.small", "0.0000000000"), wantType: "m1.small"},
		{name: "no instance type", doc: `{"product":{"attributes":{}}}`},
		{name: "bad price", doc: priceDocument("m5.large", "cheap"), wantErr: true},
		{name: "not JSON", doc: `<xml/>`, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, price, ok, err := parsePricingProduct(tc.doc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if name != tc.wantType || price != tc.wantPrice || ok != tc.wantOK {
				t.Fatalf("got (%q, %v, %v), want (%q, %v, %v)", name, price, ok, tc.wantType, tc.wantPrice, tc.wantOK)
			}
		})
	}
}

func TestInstanceTypesCachedWithinTTL(t *testing.T) {
	f := newFixture(t)
	if _, err := f.provider.InstanceTypes.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Throttle every EC2 call: a cached answer needs none.
	if err := f.emu.SetThrottle(throttleAll()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.provider.InstanceTypes.List(context.Background()); err != nil {
		t.Fatalf("cached listing called EC2: %v", err)
	}
	// Past the TTL the refresh fails, and the previous answer is served.
	f.clock.Step(DefaultInstanceTypesTTL + time.Second)
	types, err := f.provider.InstanceTypes.List(context.Background())
	if err != nil || len(types) == 0 {
		t.Fatalf("stale answer not served when EC2 is throttled: %d types, %v", len(types), err)
	}
}
