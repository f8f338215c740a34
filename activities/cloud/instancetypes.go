package cloud

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/millwright/millwright/activities"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// Cache lifetimes of the instance type provider's EC2 and Pricing answers.
const (
	// DefaultInstanceTypesTTL: shapes and zone offerings change when AWS
	// launches a type, not within a day.
	DefaultInstanceTypesTTL = time.Hour
	// DefaultSpotPricesTTL: spot prices move a few times a day.
	DefaultSpotPricesTTL = 15 * time.Minute
	// DefaultOnDemandPricesTTL: on-demand prices change rarely.
	DefaultOnDemandPricesTTL = 12 * time.Hour
	// DefaultPricingRetryAfter is how long the catalog's prices stand in
	// after the Pricing API failed before it is asked again.
	DefaultPricingRetryAfter = 10 * time.Minute
)

// spotProductDescription selects Linux spot prices (VPC instances use the
// same pool price).
const spotProductDescription = "Linux/UNIX"

// InstanceTypeProviderOptions configures an InstanceTypeProvider.
type InstanceTypeProviderOptions struct {
	EC2 EC2API
	// Pricing, when nil, means on-demand prices come from Catalog.
	Pricing PricingAPI
	// Region is the region whose on-demand prices the Pricing API is asked
	// for.
	Region string
	// Catalog is the fallback for on-demand prices (and for shapes of types
	// EC2 does not describe); default catalog.Default().
	Catalog     *catalog.Catalog
	Unavailable *UnavailableOfferings
	Clock       clock.PassiveClock
	Logger      *zap.Logger

	InstanceTypesTTL  time.Duration
	SpotPricesTTL     time.Duration
	OnDemandPricesTTL time.Duration
	PricingRetryAfter time.Duration
}

// InstanceTypeProvider answers "which instance types can this account
// launch, where, at what price": shapes from DescribeInstanceTypes, zones from
// DescribeInstanceTypeOfferings, spot prices from DescribeSpotPriceHistory,
// on-demand prices from the Pricing API with the embedded catalog as
// fallback, and availability from the unavailable-offerings cache. Every
// answer is cached; safe for concurrent use.
type InstanceTypeProvider struct {
	opts InstanceTypeProviderOptions
	log  *zap.Logger

	// refreshMu serialises refreshes so concurrent callers do not each call
	// EC2 when a cache expires.
	refreshMu sync.Mutex
	shapes    cachedValue[map[string]catalog.InstanceTypeSpec]
	zones     cachedValue[map[string][]string]
	spot      cachedValue[map[typeZone]float64]
	onDemand  cachedValue[map[string]float64]
	// supportsSpot lists the types whose usage classes include spot.
	supportsSpot map[string]bool
}

type typeZone struct{ instanceType, zone string }

// cachedValue is one cached answer with when it was fetched. It is kept by
// hand instead of in an expiring cache because an expired answer is still
// served when the refresh fails (EC2 throttled or unreachable): a planner
// with hour-old prices beats one with none.
type cachedValue[T any] struct {
	value     T
	fetchedAt time.Time
	valid     bool
	ttl       time.Duration
}

func (c *cachedValue[T]) fresh(now time.Time) bool {
	return c.valid && now.Sub(c.fetchedAt) < c.ttl
}

func (c *cachedValue[T]) set(v T, now time.Time, ttl time.Duration) {
	c.value, c.fetchedAt, c.valid, c.ttl = v, now, true, ttl
}

// NewInstanceTypeProvider returns a provider with empty caches.
func NewInstanceTypeProvider(opts InstanceTypeProviderOptions) (*InstanceTypeProvider, error) {
	if opts.EC2 == nil {
		return nil, fmt.Errorf("instance type provider: EC2 client is nil")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Catalog == nil {
		c, err := catalog.Default()
		if err != nil {
			return nil, err
		}
		opts.Catalog = c
	}
	if opts.Region == "" {
		opts.Region = opts.Catalog.Region
	}
	if opts.Unavailable == nil {
		opts.Unavailable = NewUnavailableOfferings(opts.Clock, opts.Logger)
	}
	defaultTTL(&opts.InstanceTypesTTL, DefaultInstanceTypesTTL)
	defaultTTL(&opts.SpotPricesTTL, DefaultSpotPricesTTL)
	defaultTTL(&opts.OnDemandPricesTTL, DefaultOnDemandPricesTTL)
	defaultTTL(&opts.PricingRetryAfter, DefaultPricingRetryAfter)
	return &InstanceTypeProvider{opts: opts, log: opts.Logger.Named("instancetypes")}, nil
}

func defaultTTL(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// List returns every launchable instance type with its capacity,
// allocatable, labels and offerings (one per zone and capacity type that has
// a price), sorted by name, offerings cheapest first. Offerings recently out
// of capacity are listed with Available false.
func (p *InstanceTypeProvider) List(ctx context.Context) ([]*catalog.InstanceType, error) {
	snap, err := p.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(snap.shapes))
	for name := range snap.shapes {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*catalog.InstanceType, 0, len(names))
	for _, name := range names {
		offerings := p.offerings(snap, name)
		if len(offerings) == 0 {
			continue
		}
		out = append(out, snap.shapes[name].InstanceType(offerings))
	}
	return out, nil
}

// ListInZones is List with offerings restricted to zones (the zones of a
// NodeClass's subnets); types with no offering left are dropped.
func (p *InstanceTypeProvider) ListInZones(ctx context.Context, zones []string) ([]*catalog.InstanceType, error) {
	all, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, z := range zones {
		allowed[z] = true
	}
	out := all[:0]
	for _, it := range all {
		kept := it.Offerings[:0]
		for _, o := range it.Offerings {
			if allowed[o.Zone] {
				kept = append(kept, o)
			}
		}
		if len(kept) > 0 {
			it.Offerings = kept
			out = append(out, it)
		}
	}
	return out, nil
}

// Spec returns the shape of one instance type: EC2's description when
// known, else the catalog's.
func (p *InstanceTypeProvider) Spec(ctx context.Context, name string) (catalog.InstanceTypeSpec, bool) {
	snap, err := p.snapshot(ctx)
	if err == nil {
		if s, ok := snap.shapes[name]; ok {
			return s, true
		}
	}
	return p.opts.Catalog.Get(name)
}

// snapshotData is a consistent view of the caches.
type snapshotData struct {
	shapes       map[string]catalog.InstanceTypeSpec
	zones        map[string][]string
	spot         map[typeZone]float64
	onDemand     map[string]float64
	supportsSpot map[string]bool
}

// snapshot refreshes what has expired and returns the current caches.
func (p *InstanceTypeProvider) snapshot(ctx context.Context) (snapshotData, error) {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	now := p.opts.Clock.Now()

	if !p.shapes.fresh(now) {
		shapes, supportsSpot, err := p.describeInstanceTypes(ctx)
		switch {
		case err == nil:
			p.shapes.set(shapes, now, p.opts.InstanceTypesTTL)
			p.supportsSpot = supportsSpot
		case p.shapes.valid:
			p.log.Warn("DescribeInstanceTypes failed; using the previous answer", zap.Error(err))
		default:
			return snapshotData{}, err
		}
	}
	if !p.zones.fresh(now) {
		zones, err := p.describeOfferings(ctx)
		switch {
		case err == nil:
			p.zones.set(zones, now, p.opts.InstanceTypesTTL)
		case p.zones.valid:
			p.log.Warn("DescribeInstanceTypeOfferings failed; using the previous answer", zap.Error(err))
		default:
			return snapshotData{}, err
		}
	}
	if !p.spot.fresh(now) {
		spot, err := p.describeSpotPrices(ctx, now)
		switch {
		case err == nil:
			p.spot.set(spot, now, p.opts.SpotPricesTTL)
		case p.spot.valid:
			p.log.Warn("DescribeSpotPriceHistory failed; using the previous prices", zap.Error(err))
		default:
			// Without spot prices the types are still launchable on demand.
			p.log.Warn("DescribeSpotPriceHistory failed; offering on-demand only until it answers", zap.Error(err))
			p.spot.set(map[typeZone]float64{}, now, p.opts.PricingRetryAfter)
		}
	}
	if !p.onDemand.fresh(now) {
		p.refreshOnDemandPrices(ctx, now)
	}
	return snapshotData{
		shapes: p.shapes.value, zones: p.zones.value, spot: p.spot.value,
		onDemand: p.onDemand.value, supportsSpot: p.supportsSpot,
	}, nil
}

// refreshOnDemandPrices asks the Pricing API when configured; types it does
// not price, and every type when it is off or fails, get the catalog's
// price.
func (p *InstanceTypeProvider) refreshOnDemandPrices(ctx context.Context, now time.Time) {
	prices := map[string]float64{}
	for _, it := range p.opts.Catalog.InstanceTypes {
		if it.OnDemandPrice > 0 {
			prices[it.Name] = it.OnDemandPrice
		}
	}
	ttl := p.opts.OnDemandPricesTTL
	if p.opts.Pricing != nil {
		live, err := onDemandPricesFromAPI(ctx, p.opts.Pricing, p.opts.Region)
		if err != nil {
			if p.onDemand.valid {
				p.log.Warn("Pricing API failed; keeping the previous on-demand prices", zap.Error(err))
				p.onDemand.set(p.onDemand.value, now, p.opts.PricingRetryAfter)
				return
			}
			p.log.Warn("Pricing API failed; using the embedded catalog's on-demand prices", zap.Error(err))
			ttl = p.opts.PricingRetryAfter
		} else {
			for name, price := range live {
				prices[name] = price
			}
		}
	}
	p.onDemand.set(prices, now, ttl)
}

func (p *InstanceTypeProvider) offerings(snap snapshotData, name string) catalog.Offerings {
	var out catalog.Offerings
	for _, zone := range snap.zones[name] {
		if price, ok := snap.onDemand[name]; ok {
			out = append(out, catalog.Offering{
				Zone: zone, CapacityType: scheduling.CapacityTypeOnDemand, Price: price,
				Available: !p.opts.Unavailable.IsUnavailable(activities.OfferingKey{InstanceType: name, Zone: zone, CapacityType: activities.CapacityTypeOnDemand}),
			})
		}
		if price, ok := snap.spot[typeZone{name, zone}]; ok && snap.supportsSpot[name] {
			out = append(out, catalog.Offering{
				Zone: zone, CapacityType: scheduling.CapacityTypeSpot, Price: price,
				Available: !p.opts.Unavailable.IsUnavailable(activities.OfferingKey{InstanceType: name, Zone: zone, CapacityType: activities.CapacityTypeSpot}),
			})
		}
	}
	out.SortByPrice()
	return out
}

func (p *InstanceTypeProvider) describeInstanceTypes(ctx context.Context) (map[string]catalog.InstanceTypeSpec, map[string]bool, error) {
	shapes := map[string]catalog.InstanceTypeSpec{}
	supportsSpot := map[string]bool{}
	pages := ec2.NewDescribeInstanceTypesPaginator(p.opts.EC2, &ec2.DescribeInstanceTypesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
			{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
		},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("DescribeInstanceTypes: %w", err)
		}
		for i := range page.InstanceTypes {
			info := &page.InstanceTypes[i]
			spec, ok := SpecFromEC2(info)
			if !ok {
				continue
			}
			if known, ok := p.opts.Catalog.Get(spec.Name); ok {
				FillLabels(&spec, known)
			}
			shapes[spec.Name] = spec
			for _, class := range info.SupportedUsageClasses {
				if class == ec2types.UsageClassTypeSpot {
					supportsSpot[spec.Name] = true
				}
			}
		}
	}
	if len(shapes) == 0 {
		return nil, nil, fmt.Errorf("DescribeInstanceTypes returned no usable instance types")
	}
	return shapes, supportsSpot, nil
}

func (p *InstanceTypeProvider) describeOfferings(ctx context.Context) (map[string][]string, error) {
	zones := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.opts.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstanceTypeOfferings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			name := string(o.InstanceType)
			zones[name] = append(zones[name], aws.ToString(o.Location))
		}
	}
	for _, z := range zones {
		sort.Strings(z)
	}
	return zones, nil
}

// describeSpotPrices returns the latest spot price of every pool: asking
// from now returns, per pool, the price in effect now.
func (p *InstanceTypeProvider) describeSpotPrices(ctx context.Context, now time.Time) (map[typeZone]float64, error) {
	type stamped struct {
		price float64
		at    time.Time
	}
	latest := map[typeZone]stamped{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.opts.EC2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{spotProductDescription},
		StartTime:           aws.Time(now),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeSpotPriceHistory: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			price, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil || price <= 0 {
				continue
			}
			key := typeZone{string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)}
			at := aws.ToTime(sp.Timestamp)
			if prev, ok := latest[key]; !ok || at.After(prev.at) {
				latest[key] = stamped{price, at}
			}
		}
	}
	out := make(map[typeZone]float64, len(latest))
	for k, v := range latest {
		out[k] = v.price
	}
	return out, nil
}

// instanceTypeName splits a type name into category, generation and the
// rest of the family (Karpenter's scheme: "u-6tb1" has category u and
// generation 1, "u7i-12tb" category u and generation 7).
var instanceTypeName = regexp.MustCompile(`^([a-z]+)(-[0-9]+tb)?([0-9]+)`)

// Max pods per node: the ENI limit, capped at 110 (≤30 vCPUs) or 250, the
// limits EKS recommends (and the catalog uses).
const (
	maxPodsSmallNode   = 110
	maxPodsLargeNode   = 250
	smallNodeVCPULimit = 30
)

// SpecFromEC2 turns a DescribeInstanceTypes answer into the catalog's shape
// (price left zero). ok is false for types Millwright cannot run nodes on
// (no x86_64 or arm64 support, no vCPU or memory figures, unparseable name).
func SpecFromEC2(info *ec2types.InstanceTypeInfo) (catalog.InstanceTypeSpec, bool) {
	name := string(info.InstanceType)
	family, size, found := strings.Cut(name, ".")
	if !found || info.VCpuInfo == nil || info.MemoryInfo == nil || info.ProcessorInfo == nil {
		return catalog.InstanceTypeSpec{}, false
	}
	spec := catalog.InstanceTypeSpec{
		Name:      name,
		Family:    family,
		Size:      size,
		VCPU:      int(aws.ToInt32(info.VCpuInfo.DefaultVCpus)),
		MemoryMiB: aws.ToInt64(info.MemoryInfo.SizeInMiB),
		BareMetal: aws.ToBool(info.BareMetal),
		// EC2 reports no hypervisor for bare metal; the label is then absent.
		Hypervisor: string(info.Hypervisor),
	}
	for _, arch := range info.ProcessorInfo.SupportedArchitectures {
		switch arch {
		case ec2types.ArchitectureTypeX8664:
			spec.Arch = "amd64"
		case ec2types.ArchitectureTypeArm64:
			spec.Arch = "arm64"
		}
		if spec.Arch != "" {
			break
		}
	}
	if spec.Arch == "" || spec.VCPU <= 0 || spec.MemoryMiB <= 0 {
		return catalog.InstanceTypeSpec{}, false
	}
	if m := instanceTypeName.FindStringSubmatch(family); m != nil {
		spec.Category = m[1]
		spec.Generation, _ = strconv.Atoi(m[3])
	}
	if n := info.NetworkInfo; n != nil {
		spec.ENIs = int(aws.ToInt32(n.MaximumNetworkInterfaces))
		spec.IPv4PerENI = int(aws.ToInt32(n.Ipv4AddressesPerInterface))
	}
	spec.MaxPods = maxPods(spec)
	spec.GPU = acceleratorOf(info)
	spec.ExtraLabels = extraLabelsOf(info)
	return spec, true
}

// FillLabels adds the labels EC2's answer does not carry (network
// bandwidth, capability flex, GPU memory, and any other it left out) from
// the catalog's row of the same type.
func FillLabels(spec *catalog.InstanceTypeSpec, known catalog.InstanceTypeSpec) {
	for k, v := range known.ExtraLabels {
		if _, set := spec.ExtraLabels[k]; !set {
			if spec.ExtraLabels == nil {
				spec.ExtraLabels = map[string]string{}
			}
			spec.ExtraLabels[k] = v
		}
	}
}

// extraLabelsOf reads the Karpenter AWS labels EC2's answer carries: CPU
// manufacturer and sustained clock, local NVMe size, encryption in transit.
func extraLabelsOf(info *ec2types.InstanceTypeInfo) map[string]string {
	out := map[string]string{}
	if m := aws.ToString(info.ProcessorInfo.Manufacturer); m != "" {
		out[scheduling.LabelInstanceCPUManufacturer] = labelValue(m)
	}
	if ghz := aws.ToFloat64(info.ProcessorInfo.SustainedClockSpeedInGhz); ghz > 0 {
		out[scheduling.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.Itoa(int(ghz*1000 + 0.5))
	}
	if st := info.InstanceStorageInfo; st != nil && st.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && aws.ToInt64(st.TotalSizeInGB) > 0 {
		out[scheduling.LabelInstanceLocalNVME] = strconv.FormatInt(aws.ToInt64(st.TotalSizeInGB), 10)
	}
	if n := info.NetworkInfo; n != nil && n.EncryptionInTransitSupported != nil {
		out[scheduling.LabelInstanceEncryptionInTransitSupported] = strconv.FormatBool(*n.EncryptionInTransitSupported)
	}
	if info.EbsInfo != nil && info.EbsInfo.EbsOptimizedInfo != nil && info.EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps != nil {
		out[scheduling.LabelInstanceEBSBandwidth] = strconv.Itoa(int(*info.EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func maxPods(spec catalog.InstanceTypeSpec) int {
	if spec.ENIs <= 0 || spec.IPv4PerENI <= 1 {
		return maxPodsSmallNode
	}
	limit := maxPodsLargeNode
	if spec.VCPU <= smallNodeVCPULimit {
		limit = maxPodsSmallNode
	}
	return min(spec.ENIs*(spec.IPv4PerENI-1)+2, limit)
}

// acceleratorOf reads GPUs or Neuron devices and names the Kubernetes
// extended resource their device plugin advertises.
func acceleratorOf(info *ec2types.InstanceTypeInfo) catalog.GPU {
	if info.NeuronInfo != nil && len(info.NeuronInfo.NeuronDevices) > 0 {
		d := info.NeuronInfo.NeuronDevices[0]
		return catalog.GPU{
			Count: int(aws.ToInt32(d.Count)), Manufacturer: "aws",
			Name: labelValue(aws.ToString(d.Name)), Resource: string(scheduling.ResourceAWSNeuron),
		}
	}
	if info.GpuInfo == nil || len(info.GpuInfo.Gpus) == 0 {
		return catalog.GPU{}
	}
	d := info.GpuInfo.Gpus[0]
	g := catalog.GPU{
		Count:        int(aws.ToInt32(d.Count)),
		Manufacturer: labelValue(aws.ToString(d.Manufacturer)),
		Name:         labelValue(aws.ToString(d.Name)),
	}
	if g.Count > 0 {
		switch g.Manufacturer {
		case "nvidia":
			g.Resource = string(scheduling.ResourceNvidiaGPU)
		case "amd":
			g.Resource = string(scheduling.ResourceAMDGPU)
		case "habana":
			g.Resource = string(scheduling.ResourceHabanaGaudi)
		}
	}
	return g
}

// labelValue lower-cases EC2's device names and replaces spaces with dashes
// so they can be label values ("Radeon Pro V520" → "radeon-pro-v520").
func labelValue(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), " ", "-")
}
