package awsemu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/millwright/millwright/model/catalog"
)

// world is the part of the account that exists before anything is launched
// and never changes: zones, the VPC and its subnets, security groups, images
// and prices. Everything in it is derived deterministically from the options,
// so two emulators with the same options describe the same account.
type world struct {
	region  string
	account string
	catalog *catalog.Catalog
	zones   []zone
	vpcID   string
	subnets []*subnet
	groups  []securityGroup
	// images grow when a release is published (PublishImageRelease);
	// imagesMu guards them and latestRelease, the newest release of each
	// family.
	imagesMu      sync.RWMutex
	images        []image
	latestRelease map[string]string
	priceTS       time.Time // the timestamp spot price history reports
	priceMul      float64   // spot price = on-demand × this × per-pool factor; 1 by default
}

type zone struct {
	name string
	id   string // use1-az1 style
}

type subnet struct {
	id        string
	zone      zone
	cidr      string
	thirdBase int // 10.0.<thirdBase + n>.x are this subnet's addresses
	tags      map[string]string
	nextHost  int // next host offset to try
	used      int // addresses handed out
}

// subnetSize is how many /24s each subnet spans (a /19).
const subnetSize = 32

type securityGroup struct {
	id, name, description string
	tags                  map[string]string
}

type image struct {
	id, name, description string
	arch                  string // x86_64 | arm64
	created               time.Time
	deprecated            time.Time
	ownerID, ownerAlias   string
	tags                  map[string]string
	// os is how a node booted from the image reads its userData and what
	// it reports: al2023 (nodeadm), al2 (bootstrap.sh), bottlerocket
	// (TOML settings) or windows (the EKS bootstrap PowerShell).
	os string
	// windowsBuild is node.kubernetes.io/windows-build for Windows images.
	windowsBuild string
	// ssmParameters are the public SSM parameters whose value is this
	// image's id.
	ssmParameters []string
}

// hashHex returns n hex characters derived from parts (stable ids).
func hashHex(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}

// hashUnit maps parts to a stable number in [0, 1).
func hashUnit(parts ...string) float64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return float64(binary.BigEndian.Uint64(h.Sum(nil)[:8])>>11) / float64(1<<53)
}

func newWorld(opts Options, cat *catalog.Catalog, start time.Time) (*world, error) {
	w := &world{region: opts.Region, account: opts.AccountID, catalog: cat, priceMul: 1,
		priceTS: start.UTC().Truncate(time.Hour)}
	catalogZoneIndex := map[string]int{}
	for i, z := range cat.Zones {
		catalogZoneIndex[z] = i
	}
	for i, name := range opts.Zones {
		idx, ok := catalogZoneIndex[name]
		if !ok {
			return nil, fmt.Errorf("awsemu: zone %q is not one of the catalog's zones %v", name, cat.Zones)
		}
		z := zone{name: name, id: fmt.Sprintf("%saz%d", regionShort(opts.Region), idx+1)}
		w.zones = append(w.zones, z)
		if i*subnetSize >= 256 {
			return nil, fmt.Errorf("awsemu: at most %d zones fit the 10.0.0.0/16 VPC, got %d", 256/subnetSize, len(opts.Zones))
		}
	}
	w.vpcID = "vpc-" + hashHex(17, opts.AccountID, opts.Region, "vpc")
	for i, z := range w.zones {
		tags := map[string]string{"Name": fmt.Sprintf("%s-private-%s", opts.ClusterName, z.name)}
		for k, v := range opts.DiscoveryTags {
			tags[k] = v
		}
		w.subnets = append(w.subnets, &subnet{
			id:        "subnet-" + hashHex(17, opts.AccountID, z.name, "subnet"),
			zone:      z,
			cidr:      fmt.Sprintf("10.0.%d.0/19", i*subnetSize),
			thirdBase: i * subnetSize,
			// Start at a random place in the subnet's first half, so that
			// instances of a new emulator run do not take the addresses —
			// hence the Node names — of a previous run's instances, whose
			// Nodes may still be in a cluster that outlived it.
			nextHost: rand.IntN(subnetSize * 256 / 2),
			tags:     tags,
		})
	}
	nodeTags := map[string]string{"Name": opts.ClusterName + "-node"}
	for k, v := range opts.DiscoveryTags {
		nodeTags[k] = v
	}
	w.groups = []securityGroup{
		{id: "sg-" + hashHex(17, opts.AccountID, "default"), name: "default", description: "default VPC security group", tags: map[string]string{}},
		{id: "sg-" + hashHex(17, opts.AccountID, "node"), name: opts.ClusterName + "-node", description: "Millwright nodes of " + opts.ClusterName, tags: nodeTags},
	}
	w.images = defaultImages(opts.KubernetesVersion)
	w.latestRelease = map[string]string{
		osAL2023: amazonLinuxReleases[len(amazonLinuxReleases)-1].version, osAL2: amazonLinuxReleases[len(amazonLinuxReleases)-1].version,
		osBottlerocket: bottlerocketReleases[len(bottlerocketReleases)-1].version, osWindows: windowsReleases[len(windowsReleases)-1].version,
	}
	return w, nil
}

// regionShort turns us-east-1 into "use1-" (the zone-id prefix EC2 uses).
func regionShort(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) == 3 && parts[1] != "" {
		return parts[0] + parts[1][:1] + parts[2] + "-"
	}
	return region + "-"
}

func (w *world) zoneByName(name string) (zone, bool) {
	for _, z := range w.zones {
		if z.name == name {
			return z, true
		}
	}
	return zone{}, false
}

func (w *world) subnetByID(id string) (*subnet, bool) {
	for _, s := range w.subnets {
		if s.id == id {
			return s, true
		}
	}
	return nil, false
}

func (w *world) subnetInZone(zoneName string) (*subnet, bool) {
	for _, s := range w.subnets {
		if s.zone.name == zoneName {
			return s, true
		}
	}
	return nil, false
}

func (w *world) imageByID(id string) (image, bool) {
	for _, im := range w.imageList() {
		if im.id == id {
			return im, true
		}
	}
	return image{}, false
}

func (w *world) groupByID(id string) (securityGroup, bool) {
	for _, g := range w.groups {
		if g.id == id {
			return g, true
		}
	}
	return securityGroup{}, false
}

// Capacity types, as EC2 Fleet names them.
const (
	capacitySpot     = "spot"
	capacityOnDemand = "on-demand"
)

// spotPrice is the simulated spot price of a pool: a stable 30–70% of the
// on-demand price, different per zone, so "cheapest" depends on the zone as
// it does in reality.
func (w *world) spotPrice(it catalog.InstanceTypeSpec, zoneName string) float64 {
	fraction := 0.30 + 0.40*hashUnit("spot-price", it.Name, zoneName)
	return roundPrice(it.OnDemandPrice * fraction * w.priceMul)
}

func roundPrice(p float64) float64 {
	r := math.Round(p*1e4) / 1e4
	if r == 0 && p > 0 {
		return 0.0001
	}
	return r
}

// poolPrice is what one instance of the pool costs per hour.
func (w *world) poolPrice(it catalog.InstanceTypeSpec, zoneName, capacityType string) float64 {
	if capacityType == capacitySpot {
		return w.spotPrice(it, zoneName)
	}
	return it.OnDemandPrice
}

// spotCapacityScore is the simulated depth of a spot pool, 1 (shallow) to 10
// (deep); price-capacity-optimized and capacity-optimized prefer deep pools.
func (w *world) spotCapacityScore(instanceType, zoneName string) int {
	return 1 + int(hashUnit("spot-capacity", instanceType, zoneName)*10)
}

// allocateAddress hands out the subnet's next private address, 10.0.x.y.
func (s *subnet) allocateAddress() (string, error) {
	// Skip .0 and .255 of every /24 and the first /24's first four addresses
	// (AWS reserves them), keep the rest in order.
	for {
		n := s.nextHost
		s.nextHost++
		third := s.thirdBase + n/256
		fourth := n % 256
		if third >= s.thirdBase+subnetSize {
			return "", fmt.Errorf("subnet %s (%s) has no free addresses", s.id, s.cidr)
		}
		if fourth == 0 || fourth == 255 || (third == s.thirdBase && fourth < 4) {
			continue
		}
		s.used++
		return fmt.Sprintf("10.0.%d.%d", third, fourth), nil
	}
}

// availableAddresses is how many addresses remain in the subnet (a /19 has
// 8187 usable addresses once AWS takes its five).
func (s *subnet) availableAddresses() int { return 8187 - s.used }
