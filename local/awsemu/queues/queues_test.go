package queues

import "testing"

func TestMD5OfMessageAttributes(t *testing.T) {
	attrs := func(value string) map[string]MessageAttributeValue {
		return map[string]MessageAttributeValue{
			"b": {DataType: "Binary", BinaryValue: []byte{1, 2}},
			"a": {DataType: "String", StringValue: value},
			"n": {DataType: "Number", StringValue: "3"},
		}
	}
	first := MD5OfMessageAttributes(attrs("x"))
	for i := 0; i < 20; i++ { // map order varies between iterations
		if got := MD5OfMessageAttributes(attrs("x")); got != first {
			t.Fatalf("digest depends on map order: %s vs %s", got, first)
		}
	}
	if len(first) != 32 || MD5OfMessageAttributes(attrs("y")) == first {
		t.Errorf("digest %q does not reflect the values", first)
	}
	// A digest SQS itself returned for this attribute (a message captured
	// from the service, used as a fixture in public code).
	real := map[string]MessageAttributeValue{"AtTimestamp": {DataType: "String", StringValue: "2021-02-15T12:00:33+09:00"}}
	if got := MD5OfMessageAttributes(real); got != "9fd5e217089075be61cd1d67e35e5117" {
		t.Errorf("digest %s, SQS gives 9fd5e217089075be61cd1d67e35e5117", got)
	}
	if MD5OfMessageAttributes(nil) != "" {
		t.Error("no attributes must have no digest")
	}
}
