package cloud

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// EC2 error codes the provider acts on.
const (
	errCodeInstanceNotFound            = "InvalidInstanceID.NotFound"
	errCodeInstanceMalformed           = "InvalidInstanceID.Malformed"
	errCodeIdempotentParameterMismatch = "IdempotentParameterMismatch"
	errCodeTemplateNameExists          = "InvalidLaunchTemplateName.AlreadyExistsException"
	errCodeTemplateNameNotFound        = "InvalidLaunchTemplateName.NotFoundException"
	errCodeTemplateIDNotFound          = "InvalidLaunchTemplateId.NotFound"
)

// unfulfillableCapacityCodes are the CreateFleet error codes that mean "this
// offering has no capacity for us right now" (Karpenter's list): the offering
// is remembered as unavailable and the launch falls to the others.
var unfulfillableCapacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"MaxSpotInstanceCountExceeded":      true,
	"VcpuLimitExceeded":                 true,
	"UnfulfillableCapacity":             true,
	"Unsupported":                       true,
	"InsufficientFreeAddressesInSubnet": true,
	"ReservationCapacityExceeded":       true,
	"SpotMaxPriceTooLow":                true,
}

// notFoundCodes mean a selector term named something that does not exist.
var notFoundCodes = map[string]bool{
	"InvalidSubnetID.NotFound":          true,
	"InvalidSubnetID.Malformed":         true,
	"InvalidGroup.NotFound":             true,
	"InvalidGroupId.Malformed":          true,
	"InvalidAMIID.NotFound":             true,
	"InvalidAMIID.Malformed":            true,
	"InvalidAMIID.Unavailable":          true,
	errCodeInstanceNotFound:             true,
	errCodeTemplateNameNotFound:         true,
	errCodeTemplateIDNotFound:           true,
	"InvalidLaunchTemplateId.Malformed": true,
}

// errorCode returns the AWS error code of err, or "".
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// isThrottle reports whether err is AWS throttling, by the SDK's own list of
// throttling codes (the one its retryer uses).
func isThrottle(err error) bool {
	if err == nil {
		return false
	}
	for _, check := range retry.DefaultThrottles {
		if check.IsErrorThrottle(err) == aws.TrueTernary {
			return true
		}
	}
	return isThrottleCode(errorCode(err))
}

func isThrottleCode(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

func isNotFound(err error) bool { return notFoundCodes[errorCode(err)] }
