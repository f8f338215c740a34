// Package awsemu owns the emulated AWS account Millwright runs against on one
// machine: EC2 and IAM (instance profiles) over the Query protocol, SQS and
// SSM (GetParameter/GetParameters of the public AMI parameters) over the
// JSON protocol, served
// on one HTTP server that the real aws-sdk-go-v2 clients reach through
// endpoint configuration alone (BaseEndpoint or AWS_ENDPOINT_URL, static
// credentials). Nothing in the product changes to use it.
//
// What it holds, in memory: instances and their lifecycle (pending → running
// → shutting-down → terminated, on an injected clock), launch templates,
// instant fleets with allocation strategies, ClientToken idempotency, the
// account's fixed world (zones, a VPC with one subnet per zone, security
// groups, the public AMIs of every family — AL2023, AL2, Bottlerocket,
// Windows — in several releases with their SSM parameters, catalog instance
// types, simulated spot prices, IAM roles), and
// the SQS queues events are delivered to.
//
// It also plays the parts of the system around an instance: when an instance
// runs it registers the Node its kubelet would (through a NodeRegistrar),
// reading labels and taints from its image family's userData (nodeadm,
// bootstrap.sh, Bottlerocket TOML, the Windows bootstrap); after termination it
// deletes the Node as the cloud controller manager would; and it sends the
// EventBridge events EC2 and AWS Health send (spot interruption warnings,
// rebalance recommendations, scheduled changes, state changes).
//
// Faults are injected through Go methods or the admin HTTP API under
// /_admin/ (see AdminPathPrefix and AdminClient): throttling, insufficient
// capacity per pool, interruptions. State can be dumped (State) so tests
// check that nothing leaked.
//
// Using it:
//
//	emu, _ := awsemu.New(awsemu.Options{Registrar: registrar, EventQueue: "interruptions"})
//	_ = emu.Start("127.0.0.1:4566")
//	defer emu.Close()
//	cfg := aws.Config{Region: "us-east-1",
//		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
//	ec2Client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(emu.URL()) })
//	sqsClient := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(emu.URL()) })
//
// or, with no code at all, AWS_ENDPOINT_URL=<emu.URL()> for any SDK client
// built by config.LoadDefaultConfig. Keep the SDK's retryer: against a
// server this fast the SDK sometimes drops a connection under a response
// (aws-sdk-go-v2#2737) and retries it, as it would on AWS.
//
// It must not be imported by production code paths: the product only ever
// sees it as an AWS endpoint.
package awsemu
