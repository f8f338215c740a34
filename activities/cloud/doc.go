// Package cloud owns Millwright's EC2 side, on aws-sdk-go-v2: the Launch,
// TerminateInstance and WaitForInstanceTerminated activities (methods of
// Provider matching activities.NodeActivities), the instance types,
// offerings and prices the planner packs against (DescribeInstanceTypes,
// DescribeInstanceTypeOfferings, DescribeSpotPriceHistory, the Pricing API
// with the embedded catalog as fallback), the resolution of an
// EC2NodeClass's selector terms into subnets, security groups, AMIs and an
// instance profile, and the cache of offerings EC2 recently reported out of
// capacity.
//
// It builds SDK clients (NewEC2Client, NewPricingClient) whose standard
// retryer absorbs throttling with jittered backoff; what outlives it leaves
// an activity as the contract's Throttled error. Every activity is
// idempotent: Launch through CreateFleet's ClientToken, termination by
// treating gone instances as terminated.
//
// It must not talk to Kubernetes (EC2NodeClasses arrive through
// NodeClassGetter) and does not manage IAM: a NodeClass's role is launched
// with the instance profile of the same name.
package cloud
