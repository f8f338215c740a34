// Package cloud owns Millwright's EC2 side, on aws-sdk-go-v2: the Launch,
// TerminateInstance and WaitForInstanceTerminated activities (methods of
// Provider matching activities.NodeActivities), the instance types,
// offerings and prices the planner packs against (DescribeInstanceTypes,
// DescribeInstanceTypeOfferings, DescribeSpotPriceHistory, the Pricing API
// with the embedded catalog as fallback), the resolution of an
// EC2NodeClass's selector terms into subnets, security groups, AMIs (by
// alias for every AMI family, id, name, tags or SSM parameter) and an
// instance profile — for a role, the one InstanceProfileManager creates,
// tags and later deletes in IAM — and the cache of offerings EC2 recently
// reported out of capacity.
//
// It builds SDK clients (NewEC2Client, NewSSMClient, NewIAMClient,
// NewPricingClient) whose standard
// retryer absorbs throttling with jittered backoff; what outlives it leaves
// an activity as the contract's Throttled error. Every activity is
// idempotent: Launch through CreateFleet's ClientToken, termination by
// treating gone instances as terminated.
//
// It must not talk to Kubernetes (EC2NodeClasses arrive through
// NodeClassGetter); in IAM it touches only the instance profiles it
// manages (under /millwright/<region>/<cluster>/).
package cloud
