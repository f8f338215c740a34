package awsemu

// XML shapes of the EC2 responses the emulator writes. Element names are the
// ones aws-sdk-go-v2/service/ec2's ec2query deserializers look for (lists are
// `<somethingSet><item>…</item></somethingSet>`); unset optional fields are
// omitted rather than sent empty.

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName,omitempty"`
}

type xmlPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId,omitempty"`
	GroupName          string `xml:"groupName"`
	Tenancy            string `xml:"tenancy"`
}

type xmlIamInstanceProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xmlMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlNetworkInterface struct {
	NetworkInterfaceID string         `xml:"networkInterfaceId"`
	SubnetID           string         `xml:"subnetId"`
	VpcID              string         `xml:"vpcId"`
	OwnerID            string         `xml:"ownerId"`
	Status             string         `xml:"status"`
	MacAddress         string         `xml:"macAddress"`
	PrivateIPAddress   string         `xml:"privateIpAddress"`
	PrivateDNSName     string         `xml:"privateDnsName"`
	SourceDestCheck    bool           `xml:"sourceDestCheck"`
	Groups             []xmlGroup     `xml:"groupSet>item"`
	PrivateIPAddresses []xmlPrivateIP `xml:"privateIpAddressesSet>item"`
	InterfaceType      string         `xml:"interfaceType"`
}

type xmlInstance struct {
	InstanceID            string                 `xml:"instanceId"`
	ImageID               string                 `xml:"imageId"`
	State                 xmlState               `xml:"instanceState"`
	PrivateDNSName        string                 `xml:"privateDnsName"`
	DNSName               string                 `xml:"dnsName"`
	Reason                string                 `xml:"reason"`
	AmiLaunchIndex        int                    `xml:"amiLaunchIndex"`
	InstanceType          string                 `xml:"instanceType"`
	LaunchTime            string                 `xml:"launchTime"`
	Placement             xmlPlacement           `xml:"placement"`
	Monitoring            xmlMonitoring          `xml:"monitoring"`
	SubnetID              string                 `xml:"subnetId,omitempty"`
	VpcID                 string                 `xml:"vpcId,omitempty"`
	PrivateIPAddress      string                 `xml:"privateIpAddress,omitempty"`
	SourceDestCheck       bool                   `xml:"sourceDestCheck"`
	Groups                []xmlGroup             `xml:"groupSet>item"`
	StateReason           *xmlStateReason        `xml:"stateReason,omitempty"`
	Architecture          string                 `xml:"architecture"`
	RootDeviceType        string                 `xml:"rootDeviceType"`
	RootDeviceName        string                 `xml:"rootDeviceName"`
	InstanceLifecycle     string                 `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string                 `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string                 `xml:"virtualizationType"`
	ClientToken           string                 `xml:"clientToken,omitempty"`
	Tags                  []xmlTag               `xml:"tagSet>item"`
	Hypervisor            string                 `xml:"hypervisor"`
	NetworkInterfaces     []xmlNetworkInterface  `xml:"networkInterfaceSet>item"`
	IamInstanceProfile    *xmlIamInstanceProfile `xml:"iamInstanceProfile,omitempty"`
	EbsOptimized          bool                   `xml:"ebsOptimized"`
	EnaSupport            bool                   `xml:"enaSupport"`
	MetadataOptions       xmlMetadataOptions     `xml:"metadataOptions"`
	PlatformDetails       string                 `xml:"platformDetails"`
	UsageOperation        string                 `xml:"usageOperation"`
	BootMode              string                 `xml:"currentInstanceBootMode"`
}

type xmlMonitoring struct {
	State string `xml:"state"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type runInstancesResponse struct {
	RequestID     string        `xml:"requestId"`
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	RequestID string           `xml:"requestId"`
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type returnResponse struct {
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

type xmlAvailabilityZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

type describeAvailabilityZonesResponse struct {
	RequestID string                `xml:"requestId"`
	Zones     []xmlAvailabilityZone `xml:"availabilityZoneInfo>item"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures   []string `xml:"supportedArchitectures>item"`
	SustainedClockSpeedInGhz float64  `xml:"sustainedClockSpeedInGhz"`
	Manufacturer             string   `xml:"manufacturer,omitempty"`
}

type xmlVCpuInfo struct {
	DefaultVCpus          int `xml:"defaultVCpus"`
	DefaultCores          int `xml:"defaultCores"`
	DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
}

type xmlMemoryInfo struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int    `xml:"networkCardIndex"`
	NetworkPerformance       string `xml:"networkPerformance"`
	MaximumNetworkInterfaces int    `xml:"maximumNetworkInterfaces"`
}

type xmlNetworkInfo struct {
	NetworkPerformance           string           `xml:"networkPerformance"`
	MaximumNetworkInterfaces     int              `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards          int              `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex      int              `xml:"defaultNetworkCardIndex"`
	NetworkCards                 []xmlNetworkCard `xml:"networkCards>item"`
	Ipv4AddressesPerInterface    int              `xml:"ipv4AddressesPerInterface"`
	Ipv6AddressesPerInterface    int              `xml:"ipv6AddressesPerInterface"`
	Ipv6Supported                bool             `xml:"ipv6Supported"`
	EnaSupport                   string           `xml:"enaSupport"`
	EfaSupported                 bool             `xml:"efaSupported"`
	EncryptionInTransitSupported bool             `xml:"encryptionInTransitSupported"`
}

type xmlGpuDevice struct {
	Name         string        `xml:"name"`
	Manufacturer string        `xml:"manufacturer"`
	Count        int           `xml:"count"`
	MemoryInfo   xmlMemoryInfo `xml:"memoryInfo"`
}

type xmlGpuInfo struct {
	Gpus                []xmlGpuDevice `xml:"gpus>item"`
	TotalGpuMemoryInMiB int64          `xml:"totalGpuMemoryInMiB"`
}

type xmlNeuronCoreInfo struct {
	Count   int `xml:"count"`
	Version int `xml:"version"`
}

type xmlNeuronDevice struct {
	Name       string            `xml:"name"`
	Count      int               `xml:"count"`
	CoreInfo   xmlNeuronCoreInfo `xml:"coreInfo"`
	MemoryInfo xmlMemoryInfo     `xml:"memoryInfo"`
}

type xmlNeuronInfo struct {
	NeuronDevices                []xmlNeuronDevice `xml:"neuronDevices>item"`
	TotalNeuronDeviceMemoryInMiB int64             `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlEbsInfo struct {
	EbsOptimizedSupport string `xml:"ebsOptimizedSupport"`
	EncryptionSupport   string `xml:"encryptionSupport"`
	NvmeSupport         string `xml:"nvmeSupport"`
}

type xmlInstanceTypeInfo struct {
	InstanceType                  string           `xml:"instanceType"`
	CurrentGeneration             bool             `xml:"currentGeneration"`
	FreeTierEligible              bool             `xml:"freeTierEligible"`
	SupportedUsageClasses         []string         `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes      []string         `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes  []string         `xml:"supportedVirtualizationTypes>item"`
	BareMetal                     bool             `xml:"bareMetal"`
	Hypervisor                    string           `xml:"hypervisor,omitempty"`
	ProcessorInfo                 xmlProcessorInfo `xml:"processorInfo"`
	VCpuInfo                      xmlVCpuInfo      `xml:"vCpuInfo"`
	MemoryInfo                    xmlMemoryInfo    `xml:"memoryInfo"`
	InstanceStorageSupported      bool             `xml:"instanceStorageSupported"`
	EbsInfo                       xmlEbsInfo       `xml:"ebsInfo"`
	NetworkInfo                   xmlNetworkInfo   `xml:"networkInfo"`
	GpuInfo                       *xmlGpuInfo      `xml:"gpuInfo,omitempty"`
	NeuronInfo                    *xmlNeuronInfo   `xml:"neuronInfo,omitempty"`
	HibernationSupported          bool             `xml:"hibernationSupported"`
	BurstablePerformanceSupported bool             `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported       bool             `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool             `xml:"autoRecoverySupported"`
	SupportedBootModes            []string         `xml:"supportedBootModes>item"`
}

type describeInstanceTypesResponse struct {
	RequestID     string                `xml:"requestId"`
	InstanceTypes []xmlInstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken     string                `xml:"nextToken,omitempty"`
}

type xmlInstanceTypeOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeInstanceTypeOfferingsResponse struct {
	RequestID string                    `xml:"requestId"`
	Offerings []xmlInstanceTypeOffering `xml:"instanceTypeOfferingSet>item"`
	NextToken string                    `xml:"nextToken,omitempty"`
}

type xmlSpotPrice struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId"`
}

type describeSpotPriceHistoryResponse struct {
	RequestID string         `xml:"requestId"`
	Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken,omitempty"`
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	RequestID string      `xml:"requestId"`
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

type xmlSecurityGroup struct {
	OwnerID          string   `xml:"ownerId"`
	GroupID          string   `xml:"groupId"`
	GroupName        string   `xml:"groupName"`
	GroupDescription string   `xml:"groupDescription"`
	VpcID            string   `xml:"vpcId"`
	SecurityGroupArn string   `xml:"securityGroupArn"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	RequestID string             `xml:"requestId"`
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

type xmlEbsBlockDevice struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Iops                int    `xml:"iops"`
	Throughput          int    `xml:"throughput"`
	Encrypted           bool   `xml:"encrypted"`
}

type xmlBlockDeviceMapping struct {
	DeviceName string            `xml:"deviceName"`
	Ebs        xmlEbsBlockDevice `xml:"ebs"`
}

type xmlImage struct {
	ImageID            string                  `xml:"imageId"`
	ImageLocation      string                  `xml:"imageLocation"`
	ImageState         string                  `xml:"imageState"`
	ImageOwnerID       string                  `xml:"imageOwnerId"`
	CreationDate       string                  `xml:"creationDate"`
	IsPublic           bool                    `xml:"isPublic"`
	Architecture       string                  `xml:"architecture"`
	ImageType          string                  `xml:"imageType"`
	ImageOwnerAlias    string                  `xml:"imageOwnerAlias"`
	Name               string                  `xml:"name"`
	Description        string                  `xml:"description"`
	RootDeviceType     string                  `xml:"rootDeviceType"`
	RootDeviceName     string                  `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlBlockDeviceMapping `xml:"blockDeviceMapping>item"`
	VirtualizationType string                  `xml:"virtualizationType"`
	Tags               []xmlTag                `xml:"tagSet>item"`
	Hypervisor         string                  `xml:"hypervisor"`
	EnaSupport         bool                    `xml:"enaSupport"`
	Platform           string                  `xml:"platform,omitempty"`
	PlatformDetails    string                  `xml:"platformDetails"`
	UsageOperation     string                  `xml:"usageOperation"`
	BootMode           string                  `xml:"bootMode"`
	DeprecationTime    string                  `xml:"deprecationTime,omitempty"`
}

type describeImagesResponse struct {
	RequestID string     `xml:"requestId"`
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

type xmlLaunchTemplate struct {
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int64    `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64    `xml:"latestVersionNumber"`
	Tags                 []xmlTag `xml:"tagSet>item"`
}

type launchTemplateResponse struct {
	RequestID      string            `xml:"requestId"`
	LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
}

type describeLaunchTemplatesResponse struct {
	RequestID       string              `xml:"requestId"`
	LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
	NextToken       string              `xml:"nextToken,omitempty"`
}

type xmlFleetLaunchTemplateSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xmlFleetOverrides struct {
	InstanceType     string  `xml:"instanceType,omitempty"`
	SubnetID         string  `xml:"subnetId,omitempty"`
	AvailabilityZone string  `xml:"availabilityZone,omitempty"`
	ImageID          string  `xml:"imageId,omitempty"`
	MaxPrice         string  `xml:"maxPrice,omitempty"`
	Priority         *string `xml:"priority,omitempty"`
	WeightedCapacity *string `xml:"weightedCapacity,omitempty"`
}

type xmlLaunchTemplateAndOverrides struct {
	LaunchTemplateSpecification xmlFleetLaunchTemplateSpec `xml:"launchTemplateSpecification"`
	Overrides                   xmlFleetOverrides          `xml:"overrides"`
}

type xmlFleetError struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	ErrorCode                  string                        `xml:"errorCode"`
	ErrorMessage               string                        `xml:"errorMessage"`
}

type xmlFleetInstance struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	InstanceIDs                []string                      `xml:"instanceIds>item"`
	InstanceType               string                        `xml:"instanceType"`
	Platform                   string                        `xml:"platform,omitempty"`
}

type createFleetResponse struct {
	RequestID string             `xml:"requestId"`
	FleetID   string             `xml:"fleetId"`
	Errors    []xmlFleetError    `xml:"errorSet>item"`
	Instances []xmlFleetInstance `xml:"fleetInstanceSet>item"`
}
