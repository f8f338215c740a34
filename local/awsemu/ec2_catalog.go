package awsemu

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/millwright/millwright/local/awsemu/ec2query"
	"github.com/millwright/millwright/model/catalog"
	"github.com/millwright/millwright/model/scheduling"
)

// Handlers that describe what the account can launch: zones, instance types,
// where each type is offered, and spot prices.

func (e *Emulator) describeAvailabilityZones(c *ec2Call) (any, error) {
	names := c.Params.Strings("ZoneName")
	ids := c.Params.Strings("ZoneId")
	filters := c.Params.Filters()
	resp := describeAvailabilityZonesResponse{RequestID: c.RequestID}
	for _, z := range e.world.zones {
		if len(names) > 0 && !contains(names, z.name) {
			continue
		}
		if len(ids) > 0 && !contains(ids, z.id) {
			continue
		}
		ok, err := matchFilters(filters, nil, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z.name}, true
			case "zone-id":
				return []string{z.id}, true
			case "region-name":
				return []string{e.opts.Region}, true
			case "state":
				return []string{"available"}, true
			case "zone-type":
				return []string{"availability-zone"}, true
			case "group-name", "network-border-group":
				return []string{e.opts.Region}, true
			case "opt-in-status":
				return []string{"opt-in-not-required"}, true
			}
			return nil, false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			resp.Zones = append(resp.Zones, xmlAvailabilityZone{
				ZoneName: z.name, ZoneID: z.id, ZoneState: "available", RegionName: e.opts.Region,
				GroupName: e.opts.Region, NetworkBorderGroup: e.opts.Region, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone",
			})
		}
	}
	for _, n := range names {
		if _, ok := e.world.zoneByName(n); !ok {
			return nil, ec2query.InvalidParameterValue("Invalid availability zone: [%s]", n)
		}
	}
	return resp, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// previousGenerationFamilies are the families EC2 reports with
// currentGeneration=false.
var previousGenerationFamilies = map[string]bool{
	"c1": true, "c3": true, "c4": true, "cc2": true, "cr1": true, "g2": true, "hs1": true, "i2": true,
	"m1": true, "m2": true, "m3": true, "m4": true, "r3": true, "r4": true, "t1": true,
}

func instanceTypeFilterValues(it catalog.InstanceTypeSpec) filterValues {
	return func(name string) ([]string, bool) {
		switch name {
		case "instance-type":
			return []string{it.Name}, true
		case "current-generation":
			return []string{boolString(!previousGenerationFamilies[it.Family])}, true
		case "bare-metal":
			return []string{boolString(it.BareMetal)}, true
		case "hypervisor":
			return []string{it.Hypervisor}, true
		case "processor-info.supported-architecture":
			return []string{ec2Arch(it.Arch)}, true
		case "vcpu-info.default-vcpus":
			return []string{strconv.Itoa(it.VCPU)}, true
		case "memory-info.size-in-mib":
			return []string{strconv.FormatInt(it.MemoryMiB, 10)}, true
		case "supported-usage-class":
			return []string{capacityOnDemand, capacitySpot}, true
		case "supported-virtualization-type":
			return []string{"hvm"}, true
		case "supported-root-device-type":
			return []string{"ebs"}, true
		case "free-tier-eligible":
			return []string{boolString(it.Name == "t2.micro" || it.Name == "t3.micro")}, true
		case "burstable-performance-supported":
			return []string{boolString(isBurstable(it))}, true
		case "network-info.maximum-network-interfaces":
			return []string{strconv.Itoa(it.ENIs)}, true
		case "network-info.ipv4-addresses-per-interface":
			return []string{strconv.Itoa(it.IPv4PerENI)}, true
		case "gpu-info.gpus.manufacturer":
			if it.GPU.Count > 0 && it.GPU.Resource != "aws.amazon.com/neuron" {
				return []string{gpuManufacturer(it.GPU.Manufacturer)}, true
			}
			return nil, true
		}
		return nil, false
	}
}

func isBurstable(it catalog.InstanceTypeSpec) bool {
	return strings.HasPrefix(it.Family, "t")
}

func gpuManufacturer(m string) string {
	switch strings.ToLower(m) {
	case "nvidia":
		return "NVIDIA"
	case "amd":
		return "AMD"
	case "habana":
		return "Habana"
	}
	return m
}

func (e *Emulator) describeInstanceTypes(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(5, 100, 100)
	if err != nil {
		return nil, err
	}
	filters := c.Params.Filters()
	if err := validateFilters(filters, false, instanceTypeFilterValues(catalog.InstanceTypeSpec{})); err != nil {
		return nil, err
	}
	requested := c.Params.Strings("InstanceType")
	var missing []string
	for _, n := range requested {
		if _, ok := e.opts.Catalog.Get(n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, ec2query.Errorf(http.StatusBadRequest, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	var matched []catalog.InstanceTypeSpec
	for _, it := range e.opts.Catalog.InstanceTypes {
		if len(requested) > 0 && !contains(requested, it.Name) {
			continue
		}
		ok, err := matchFilters(filters, nil, instanceTypeFilterValues(it))
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, it)
		}
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	resp := describeInstanceTypesResponse{RequestID: c.RequestID, NextToken: next}
	for _, it := range matched[start:end] {
		resp.InstanceTypes = append(resp.InstanceTypes, instanceTypeInfo(it))
	}
	return resp, nil
}

// instanceTypeInfo renders a catalog row as DescribeInstanceTypes does.
// Fields the catalog lacks (clock speed, GPU memory) get plausible constants.
func instanceTypeInfo(it catalog.InstanceTypeSpec) xmlInstanceTypeInfo {
	threads := 2
	if it.Arch == "arm64" || it.VCPU == 1 {
		threads = 1
	}
	nitro := it.Hypervisor == "nitro" || it.BareMetal
	networkPerformance := "Up to 12.5 Gigabit"
	if it.VCPU >= 32 {
		networkPerformance = "25 Gigabit"
	}
	info := xmlInstanceTypeInfo{
		InstanceType:                  it.Name,
		CurrentGeneration:             !previousGenerationFamilies[it.Family],
		FreeTierEligible:              it.Name == "t2.micro" || it.Name == "t3.micro",
		SupportedUsageClasses:         []string{capacityOnDemand, capacitySpot},
		SupportedRootDeviceTypes:      []string{"ebs"},
		SupportedVirtualizationTypes:  []string{"hvm"},
		BareMetal:                     it.BareMetal,
		Hypervisor:                    it.Hypervisor,
		ProcessorInfo:                 xmlProcessorInfo{SupportedArchitectures: []string{ec2Arch(it.Arch)}, SustainedClockSpeedInGhz: 3.1},
		VCpuInfo:                      xmlVCpuInfo{DefaultVCpus: it.VCPU, DefaultCores: max(1, it.VCPU/threads), DefaultThreadsPerCore: threads},
		MemoryInfo:                    xmlMemoryInfo{SizeInMiB: it.MemoryMiB},
		EbsInfo:                       xmlEbsInfo{EbsOptimizedSupport: "default", EncryptionSupport: "supported", NvmeSupport: map[bool]string{true: "required", false: "unsupported"}[nitro]},
		HibernationSupported:          false,
		BurstablePerformanceSupported: isBurstable(it),
		DedicatedHostsSupported:       true,
		AutoRecoverySupported:         !it.BareMetal,
		SupportedBootModes:            []string{"legacy-bios", "uefi"},
		NetworkInfo: xmlNetworkInfo{
			NetworkPerformance:           networkPerformance,
			MaximumNetworkInterfaces:     it.ENIs,
			MaximumNetworkCards:          1,
			DefaultNetworkCardIndex:      0,
			NetworkCards:                 []xmlNetworkCard{{NetworkCardIndex: 0, NetworkPerformance: networkPerformance, MaximumNetworkInterfaces: it.ENIs}},
			Ipv4AddressesPerInterface:    it.IPv4PerENI,
			Ipv6AddressesPerInterface:    it.IPv4PerENI,
			Ipv6Supported:                nitro,
			EnaSupport:                   map[bool]string{true: "required", false: "supported"}[nitro],
			EncryptionInTransitSupported: nitro,
		},
	}
	if it.Arch == "arm64" {
		info.SupportedBootModes = []string{"uefi"}
		info.ProcessorInfo.Manufacturer = "AWS"
	} else {
		info.ProcessorInfo.Manufacturer = "Intel"
	}
	// The catalog's facts, where it has them (Karpenter's labels).
	if m, ok := cpuManufacturers[it.ExtraLabels[scheduling.LabelInstanceCPUManufacturer]]; ok {
		info.ProcessorInfo.Manufacturer = m
	}
	if mhz, err := strconv.Atoi(it.ExtraLabels[scheduling.LabelInstanceCPUSustainedClockSpeedMhz]); err == nil {
		info.ProcessorInfo.SustainedClockSpeedInGhz = float64(mhz) / 1000
	}
	if v, err := strconv.ParseBool(it.ExtraLabels[scheduling.LabelInstanceEncryptionInTransitSupported]); err == nil {
		info.NetworkInfo.EncryptionInTransitSupported = v
	}
	if g := it.GPU; g.Count > 0 {
		const perDeviceMiB = 16384 // the catalog has no GPU memory; a constant keeps shapes valid
		if g.Resource == "aws.amazon.com/neuron" {
			info.NeuronInfo = &xmlNeuronInfo{
				NeuronDevices:                []xmlNeuronDevice{{Name: neuronDeviceName(g.Name), Count: g.Count, CoreInfo: xmlNeuronCoreInfo{Count: 2, Version: 2}, MemoryInfo: xmlMemoryInfo{SizeInMiB: perDeviceMiB}}},
				TotalNeuronDeviceMemoryInMiB: perDeviceMiB * int64(g.Count),
			}
		} else {
			info.GpuInfo = &xmlGpuInfo{
				Gpus:                []xmlGpuDevice{{Name: strings.ToUpper(g.Name), Manufacturer: gpuManufacturer(g.Manufacturer), Count: g.Count, MemoryInfo: xmlMemoryInfo{SizeInMiB: perDeviceMiB}}},
				TotalGpuMemoryInMiB: perDeviceMiB * int64(g.Count),
			}
		}
	}
	return info
}

// cpuManufacturers are EC2's spellings of the catalog's label values.
var cpuManufacturers = map[string]string{"intel": "Intel", "amd": "AMD", "aws": "AWS", "apple": "Apple"}

func neuronDeviceName(n string) string {
	switch n {
	case "inferentia":
		return "Inferentia"
	case "inferentia2":
		return "Inferentia2"
	case "trainium":
		return "Trainium"
	}
	return n
}

func (e *Emulator) describeInstanceTypeOfferings(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	locationType := c.Params.String("LocationType")
	if locationType == "" {
		locationType = "region"
	}
	var locations []string
	switch locationType {
	case "region":
		locations = []string{e.opts.Region}
	case "availability-zone":
		for _, z := range e.world.zones {
			locations = append(locations, z.name)
		}
	case "availability-zone-id":
		for _, z := range e.world.zones {
			locations = append(locations, z.id)
		}
	default:
		return nil, ec2query.InvalidParameterValue("Value (%s) for parameter locationType is invalid. Valid values: region, availability-zone, availability-zone-id", locationType)
	}
	filters := c.Params.Filters()
	offeringValues := func(o xmlInstanceTypeOffering) filterValues {
		return func(name string) ([]string, bool) {
			switch name {
			case "location":
				return []string{o.Location}, true
			case "instance-type":
				return []string{o.InstanceType}, true
			}
			return nil, false
		}
	}
	if err := validateFilters(filters, false, offeringValues(xmlInstanceTypeOffering{})); err != nil {
		return nil, err
	}
	// Every type is offered in every configured zone: the product's
	// availability logic is exercised through capacity faults instead.
	var matched []xmlInstanceTypeOffering
	for _, it := range e.opts.Catalog.InstanceTypes {
		for _, loc := range locations {
			o := xmlInstanceTypeOffering{InstanceType: it.Name, LocationType: locationType, Location: loc}
			ok, err := matchFilters(filters, nil, offeringValues(o))
			if err != nil {
				return nil, err
			}
			if ok {
				matched = append(matched, o)
			}
		}
	}
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeInstanceTypeOfferingsResponse{RequestID: c.RequestID, Offerings: matched[start:end], NextToken: next}, nil
}

// Product descriptions the emulator prices (Linux only).
var spotProductDescriptions = []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"}

func (e *Emulator) describeSpotPriceHistory(c *ec2Call) (any, error) {
	pageSize, err := c.Params.MaxResults(1, 10000, 1000)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"StartTime", "EndTime"} {
		if _, _, err := c.Params.Time(name); err != nil {
			return nil, err
		}
	}
	types := c.Params.Strings("InstanceType")
	for _, t := range types {
		if _, ok := e.opts.Catalog.Get(t); !ok {
			return nil, ec2query.InvalidParameterValue("Invalid value '%s' for InstanceType.", t)
		}
	}
	products := c.Params.Strings("ProductDescription")
	if len(products) == 0 {
		products = spotProductDescriptions
	}
	zoneParam := c.Params.String("AvailabilityZone")
	filters := c.Params.Filters()
	priceValues := func(p xmlSpotPrice) filterValues {
		return func(name string) ([]string, bool) {
			switch name {
			case "instance-type":
				return []string{p.InstanceType}, true
			case "availability-zone":
				return []string{p.AvailabilityZone}, true
			case "product-description":
				return []string{p.ProductDescription}, true
			case "spot-price":
				return []string{p.SpotPrice}, true
			case "timestamp":
				return []string{p.Timestamp}, true
			}
			return nil, false
		}
	}
	if err := validateFilters(filters, false, priceValues(xmlSpotPrice{})); err != nil {
		return nil, err
	}
	ts := ec2query.FormatTime(e.world.priceTS)
	var matched []xmlSpotPrice
	for _, it := range e.opts.Catalog.InstanceTypes {
		if len(types) > 0 && !contains(types, it.Name) {
			continue
		}
		for _, z := range e.world.zones {
			if zoneParam != "" && z.name != zoneParam {
				continue
			}
			for _, product := range products {
				if !contains(spotProductDescriptions, product) {
					continue
				}
				p := xmlSpotPrice{
					InstanceType: it.Name, ProductDescription: product, Timestamp: ts,
					SpotPrice:        strconv.FormatFloat(e.world.spotPrice(it, z.name), 'f', 6, 64),
					AvailabilityZone: z.name, AvailabilityZoneID: z.id,
				}
				ok, err := matchFilters(filters, nil, priceValues(p))
				if err != nil {
					return nil, err
				}
				if ok {
					matched = append(matched, p)
				}
			}
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].InstanceType < matched[j].InstanceType })
	start, end, next, err := ec2query.Page(c.Action, len(matched), pageSize, c.Params.String("NextToken"))
	if err != nil {
		return nil, err
	}
	return describeSpotPriceHistoryResponse{RequestID: c.RequestID, Prices: matched[start:end], NextToken: next}, nil
}
