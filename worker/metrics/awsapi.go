package metrics

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"go.temporal.io/sdk/activity"
	"k8s.io/utils/clock"
)

// cloudAPIMiddlewareID names the middleware on the SDK's stack.
const cloudAPIMiddlewareID = "MillwrightCloudProviderMetrics"

// AWSAPIOptions are AWS SDK stack options (aws.Config.APIOptions, or
// cloud.Config.APIOptions) that record every API call's duration and failure.
// The middleware sits first in the Initialize step, so one call is measured
// with the SDK's retries and backoffs inside it: what an activity waited.
func (m *Metrics) AWSAPIOptions(clk clock.PassiveClock) []func(*middleware.Stack) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	record := middleware.InitializeMiddlewareFunc(cloudAPIMiddlewareID, func(
		ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler,
	) (middleware.InitializeOutput, middleware.Metadata, error) {
		start := clk.Now()
		out, metadata, err := next.HandleInitialize(ctx, in)
		m.CloudAPICall(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), callerActivity(ctx), clk.Since(start), awsErrorCode(err))
		return out, metadata, err
	})
	return []func(*middleware.Stack) error{
		func(stack *middleware.Stack) error { return stack.Initialize.Add(record, middleware.Before) },
	}
}

// callerActivity names the activity making the call (Karpenter's controller
// label), or "" outside one.
func callerActivity(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).ActivityType.Name
}

// awsErrorCode is the API's error code (RequestLimitExceeded,
// InsufficientInstanceCapacity...), "canceled" for a call its context ended,
// "transport" for a call that got no API answer, "" for success.
func awsErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() != "" {
		return apiErr.ErrorCode()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	return "transport"
}
