// Package iam owns the AWS side of a Millwright deployment: the worker's
// least-privilege IAM policy (worker-policy.json) and the CloudFormation
// template of the interruption queue and the EventBridge rules that feed it
// (interruption-queue.cfn.yaml). Both are embedded so tests and tools read
// exactly the files the README tells users to deploy.
//
// worker-policy.json holds placeholders a user substitutes before creating
// the policy (envsubst does it): ${AWSRegion}, ${AWSAccountId},
// ${ClusterName}, ${NodeRoleName}, ${InterruptionQueueName}.
package iam

import _ "embed"

// WorkerPolicy is worker-policy.json.
//
//go:embed worker-policy.json
var WorkerPolicy []byte

// InterruptionQueueTemplate is interruption-queue.cfn.yaml.
//
//go:embed interruption-queue.cfn.yaml
var InterruptionQueueTemplate []byte

// PolicyPlaceholders are the ${Name} variables of worker-policy.json.
var PolicyPlaceholders = []string{"AWSRegion", "AWSAccountId", "ClusterName", "NodeRoleName", "InterruptionQueueName"}
