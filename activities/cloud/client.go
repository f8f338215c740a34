package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
)

// EC2API is the part of *ec2.Client the provider uses. The worker passes the
// real client (NewEC2Client); tests point that client at the emulator.
type EC2API interface {
	ec2.DescribeInstanceTypesAPIClient
	ec2.DescribeInstanceTypeOfferingsAPIClient
	ec2.DescribeSpotPriceHistoryAPIClient
	ec2.DescribeSubnetsAPIClient
	ec2.DescribeSecurityGroupsAPIClient
	ec2.DescribeImagesAPIClient
	ec2.DescribeLaunchTemplatesAPIClient
	ec2.DescribeInstancesAPIClient
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// PricingAPI is the part of *pricing.Client the provider uses.
type PricingAPI interface {
	pricing.GetProductsAPIClient
}

// SSMAPI is the part of *ssm.Client the provider uses: reading the AMI id
// an ssmParameter AMI selector term names.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// IAMAPI is the part of *iam.Client the provider uses: the instance
// profiles it manages for EC2NodeClasses with a role.
type IAMAPI interface {
	GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, opts ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, opts ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	TagInstanceProfile(ctx context.Context, in *iam.TagInstanceProfileInput, opts ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, opts ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, opts ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, opts ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
	ListInstanceProfiles(ctx context.Context, in *iam.ListInstanceProfilesInput, opts ...func(*iam.Options)) (*iam.ListInstanceProfilesOutput, error)
}

var (
	_ EC2API     = (*ec2.Client)(nil)
	_ PricingAPI = (*pricing.Client)(nil)
	_ SSMAPI     = (*ssm.Client)(nil)
	_ IAMAPI     = (*iam.Client)(nil)
)

// Retry defaults. The SDK's standard retryer backs off exponentially with
// full jitter (throttling errors from a 1s base), so workers throttled
// together do not retry in lockstep; these bound how long one call may keep
// retrying before the activity reports Throttled and Temporal takes over.
const (
	DefaultRetryMaxAttempts = 6
	DefaultRetryMaxBackoff  = 20 * time.Second
	// DefaultPricingRegion hosts the Pricing API (it is served from a few
	// regions only; us-east-1 answers for every region).
	DefaultPricingRegion = "us-east-1"
)

// Config says how to reach AWS.
type Config struct {
	// Region of the cluster's instances (required).
	Region string
	// Endpoint, when set, is the EC2 base endpoint (the local emulator's
	// URL). Leaving it empty uses the region's real endpoint.
	Endpoint string
	// Credentials, when set, replace the SDK's default credential chain
	// (environment, shared config, web identity, instance role). The local
	// stack passes static credentials; the emulator does not check them.
	Credentials aws.CredentialsProvider

	// RetryMaxAttempts bounds attempts per API call, the first included
	// (default DefaultRetryMaxAttempts).
	RetryMaxAttempts int
	// RetryMaxBackoff bounds one backoff delay (default DefaultRetryMaxBackoff).
	RetryMaxBackoff time.Duration

	// Pricing turns on the Pricing API for on-demand prices. When off, or
	// when it fails, prices come from the embedded catalog. The emulator has
	// no Pricing API, so the local stack leaves it off.
	Pricing bool
	// PricingRegion is where the Pricing API is called (default
	// DefaultPricingRegion).
	PricingRegion string
	// PricingEndpoint overrides the Pricing API's base endpoint.
	PricingEndpoint string

	// APIOptions are extra SDK middleware for every client built from this
	// Config (the worker's API call metrics).
	APIOptions []func(*middleware.Stack) error
}

func (c Config) withDefaults() Config {
	if c.RetryMaxAttempts <= 0 {
		c.RetryMaxAttempts = DefaultRetryMaxAttempts
	}
	if c.RetryMaxBackoff <= 0 {
		c.RetryMaxBackoff = DefaultRetryMaxBackoff
	}
	if c.PricingRegion == "" {
		c.PricingRegion = DefaultPricingRegion
	}
	return c
}

// loadAWSConfig builds the SDK configuration shared by the clients: region,
// credentials and the standard retryer.
func loadAWSConfig(ctx context.Context, c Config, region string) (aws.Config, error) {
	if region == "" {
		return aws.Config{}, errors.New("aws config: region is empty")
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = c.RetryMaxAttempts
				o.MaxBackoff = c.RetryMaxBackoff
			})
		}),
	}
	if c.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(c.Credentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config for region %s: %w", region, err)
	}
	cfg.APIOptions = append(cfg.APIOptions, c.APIOptions...)
	// Wrapped after loading, so the loader can still apply AWS_CA_BUNDLE and
	// other transport options to the buildable client it made.
	// The loader leaves HTTPClient nil unless a CA bundle is configured (the
	// service clients then build their own); the wrapper needs a real one.
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = requestBodyWithoutWriteTo{client: cfg.HTTPClient}
	return cfg, nil
}

// requestBodyWithoutWriteTo works around a race between smithy-go and
// net/http (aws-sdk-go-v2#2737): the SDK closes the request body as soon as
// response headers arrive; when the server answers before the transport's
// write loop has made its final end-of-body check, that check goes through
// the closed body's WriteTo, which returns io.EOF, and the transport tears the
// connection down under the response being read ("use of closed network
// connection"). Fast endpoints (the local emulator, a VPC endpoint) hit it
// under load. Hiding WriteTo makes the check use Read, which reports a clean
// EOF; nothing else about the request changes.
type requestBodyWithoutWriteTo struct{ client aws.HTTPClient }

func (d requestBodyWithoutWriteTo) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = struct{ io.ReadCloser }{req.Body}
	}
	return d.client.Do(req)
}

// NewSQSClient returns an SQS client for c.Region (the interruption queue's),
// at c.Endpoint when set, with the same retryer and transport as EC2.
func NewSQSClient(ctx context.Context, c Config) (*sqs.Client, error) {
	c = c.withDefaults()
	cfg, err := loadAWSConfig(ctx, c, c.Region)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	}), nil
}

// NewEC2Client returns an EC2 client for c.Region, at c.Endpoint when set.
func NewEC2Client(ctx context.Context, c Config) (*ec2.Client, error) {
	c = c.withDefaults()
	cfg, err := loadAWSConfig(ctx, c, c.Region)
	if err != nil {
		return nil, err
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	}), nil
}

// NewSSMClient returns an SSM client for c.Region, at c.Endpoint when set.
func NewSSMClient(ctx context.Context, c Config) (*ssm.Client, error) {
	c = c.withDefaults()
	cfg, err := loadAWSConfig(ctx, c, c.Region)
	if err != nil {
		return nil, err
	}
	return ssm.NewFromConfig(cfg, func(o *ssm.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	}), nil
}

// NewIAMClient returns an IAM client (a global service; the SDK signs for
// it whatever c.Region is), at c.Endpoint when set.
func NewIAMClient(ctx context.Context, c Config) (*iam.Client, error) {
	c = c.withDefaults()
	cfg, err := loadAWSConfig(ctx, c, c.Region)
	if err != nil {
		return nil, err
	}
	return iam.NewFromConfig(cfg, func(o *iam.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	}), nil
}

// NewPricingClient returns a Pricing API client, or nil (and no error) when
// c.Pricing is off: the provider then uses the catalog's prices. It returns
// the interface, not *pricing.Client, so "off" is a true nil in
// Options.Pricing rather than a typed nil pointer.
func NewPricingClient(ctx context.Context, c Config) (PricingAPI, error) {
	if !c.Pricing {
		return nil, nil
	}
	c = c.withDefaults()
	cfg, err := loadAWSConfig(ctx, c, c.PricingRegion)
	if err != nil {
		return nil, err
	}
	return pricing.NewFromConfig(cfg, func(o *pricing.Options) {
		if c.PricingEndpoint != "" {
			o.BaseEndpoint = aws.String(c.PricingEndpoint)
		}
	}), nil
}
