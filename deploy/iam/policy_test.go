package iam

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/millwright/millwright/activities/cloud"
	"github.com/millwright/millwright/worker/interruption"
)

// stringList is an IAM policy field that is either a string or a list.
type stringList []string

func (l *stringList) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*l = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return fmt.Errorf("neither a string nor a list of strings: %w", err)
	}
	*l = many
	return nil
}

type statement struct {
	Sid       string
	Effect    string
	Action    stringList
	Resource  stringList
	Condition map[string]map[string]stringList
}

type policyDocument struct {
	Version   string
	Statement []statement
}

// Values the placeholders take in these tests.
const (
	testRegion  = "us-west-2"
	testAccount = "111122223333"
	testCluster = "prod"
	testRole    = "MillwrightNodeRole-prod"
	testQueue   = "Millwright-prod"
)

func loadPolicy(t *testing.T) policyDocument {
	t.Helper()
	text := string(WorkerPolicy)
	for name, value := range map[string]string{
		"AWSRegion": testRegion, "AWSAccountId": testAccount, "ClusterName": testCluster,
		"NodeRoleName": testRole, "InterruptionQueueName": testQueue,
	} {
		text = strings.ReplaceAll(text, "${"+name+"}", value)
	}
	if i := strings.Index(text, "${"); i >= 0 {
		t.Fatalf("worker-policy.json: placeholder not in PolicyPlaceholders at %q", text[i:min(len(text), i+30)])
	}
	var doc policyDocument
	decoder := json.NewDecoder(strings.NewReader(text))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&doc); err != nil {
		t.Fatalf("worker-policy.json: %v", err)
	}
	return doc
}

// request is one AWS call as IAM authorizes it: an action on one resource
// with the condition keys the request carries.
type request struct {
	action   string
	resource string
	context  map[string]string
}

// allows is a small IAM evaluator for the policy's own shape: Allow
// statements, exact actions, resource globs, StringEquals and Bool
// conditions (every key must be present and match one value). There is no
// IAM policy simulator library for Go that works offline, and the policy
// uses nothing beyond these, which the shape test below enforces.
func (doc policyDocument) allows(r request) bool {
	for _, s := range doc.Statement {
		if s.Effect != "Allow" || !slices.Contains(s.Action, r.action) {
			continue
		}
		if !slices.ContainsFunc(s.Resource, func(pattern string) bool { return resourceMatches(pattern, r.resource) }) {
			continue
		}
		if conditionsHold(s.Condition, r.context) {
			return true
		}
	}
	return false
}

// resourceMatches is IAM's ARN matching: "*" matches any run of
// characters, "/" included; "?" matches one character.
func resourceMatches(pattern, resource string) bool {
	expr := regexp.QuoteMeta(pattern)
	expr = strings.ReplaceAll(expr, `\*`, ".*")
	expr = strings.ReplaceAll(expr, `\?`, ".")
	return regexp.MustCompile("^" + expr + "$").MatchString(resource)
}

func conditionsHold(conditions map[string]map[string]stringList, context map[string]string) bool {
	for _, keys := range conditions {
		for key, values := range keys {
			got, ok := context[key]
			if !ok || !slices.Contains(values, got) {
				return false
			}
		}
	}
	return true
}

func TestPolicyShape(t *testing.T) {
	doc := loadPolicy(t)
	if doc.Version != "2012-10-17" {
		t.Errorf("Version = %q, want 2012-10-17 (policy variables need it)", doc.Version)
	}
	sids := map[string]bool{}
	for _, s := range doc.Statement {
		if s.Sid == "" || sids[s.Sid] {
			t.Errorf("statement Sid %q: empty or repeated", s.Sid)
		}
		sids[s.Sid] = true
		if s.Effect != "Allow" {
			t.Errorf("%s: Effect %q, want Allow", s.Sid, s.Effect)
		}
		for _, action := range s.Action {
			if strings.Contains(action, "*") {
				t.Errorf("%s: action %q has a wildcard; list the actions", s.Sid, action)
			}
		}
		for operator := range s.Condition {
			if operator != "StringEquals" && operator != "Bool" {
				t.Errorf("%s: condition operator %s is not one the test evaluator knows", s.Sid, operator)
			}
		}
		// Resource "*" only where the service has no resource-level
		// permissions: EC2 Describe calls and the Pricing API.
		if slices.Contains(s.Resource, "*") {
			for _, action := range s.Action {
				if !strings.HasPrefix(action, "ec2:Describe") && action != "pricing:GetProducts" {
					t.Errorf("%s: %s on Resource \"*\"", s.Sid, action)
				}
			}
		}
	}
}

// TestPolicyAllowsEveryCallTheWorkerMakes reads the AWS client interfaces
// the worker is built on, so a new call in activities/cloud or the
// interruption poller fails here until the policy allows it.
func TestPolicyAllowsEveryCallTheWorkerMakes(t *testing.T) {
	doc := loadPolicy(t)
	allowed := map[string]bool{}
	for _, s := range doc.Statement {
		for _, a := range s.Action {
			allowed[a] = true
		}
	}
	interfaces := map[string]reflect.Type{
		"ec2":     reflect.TypeFor[cloud.EC2API](),
		"pricing": reflect.TypeFor[cloud.PricingAPI](),
		"sqs":     reflect.TypeFor[interruption.SQSAPI](),
		"ssm":     reflect.TypeFor[cloud.SSMAPI](),
		"iam":     reflect.TypeFor[cloud.IAMAPI](),
	}
	var used []string
	for service, api := range interfaces {
		for i := range api.NumMethod() {
			used = append(used, service+":"+api.Method(i).Name)
		}
	}
	// An EC2 Fleet of type instant launches through RunInstances on the
	// caller's behalf, so RunInstances is authorized too.
	used = append(used, "ec2:RunInstances", "iam:PassRole", "ec2:CreateTags")
	for _, action := range used {
		if !allowed[action] {
			t.Errorf("%s is called by the worker but not in worker-policy.json", action)
		}
	}
	slices.Sort(used)
	for action := range allowed {
		if !slices.Contains(used, action) {
			t.Errorf("%s is allowed but the worker does not call it", action)
		}
	}
}

func arn(resource string) string {
	return "arn:aws:ec2:" + testRegion + ":" + testAccount + ":" + resource
}

// clusterTags are the request tags activities/cloud puts on instances and
// their volumes (instanceTags); launchTemplateTags those on launch templates.
func clusterTags(cluster string) map[string]string {
	return map[string]string{
		"aws:RequestTag/kubernetes.io/cluster/" + cluster: "owned",
		"aws:RequestTag/millwright.dev/cluster":           cluster,
	}
}

func launchTemplateTags(cluster string) map[string]string {
	return map[string]string{"aws:RequestTag/millwright.dev/cluster": cluster}
}

func with(context map[string]string, key, value string) map[string]string {
	out := map[string]string{key: value}
	for k, v := range context {
		out[k] = v
	}
	return out
}

// profileARN is a managed instance profile's ARN (its path names the
// region and the cluster); profileTags the tags it is created with.
func profileARN(cluster string) string {
	return "arn:aws:iam::" + testAccount + ":instance-profile/millwright/" + testRegion + "/" + cluster + "/" + cluster + "_0123"
}

func profileTags(cluster string) map[string]string {
	return map[string]string{
		"aws:RequestTag/kubernetes.io/cluster/" + cluster: "owned",
		"aws:RequestTag/topology.kubernetes.io/region":    testRegion,
	}
}

func TestPolicyDecisions(t *testing.T) {
	doc := loadPolicy(t)
	region := map[string]string{"aws:RequestedRegion": testRegion}
	cases := []struct {
		name string
		request
		want bool
	}{
		{"describe in the cluster's region", request{"ec2:DescribeInstances", "*", region}, true},
		{"describe in another region", request{"ec2:DescribeInstances", "*", map[string]string{"aws:RequestedRegion": "eu-west-1"}}, false},
		{"prices", request{"pricing:GetProducts", "*", map[string]string{"aws:RequestedRegion": "us-east-1"}}, true},

		{"fleet: instance tagged for the cluster", request{"ec2:CreateFleet", arn("instance/*"), clusterTags(testCluster)}, true},
		{"fleet: instance tagged for another cluster", request{"ec2:CreateFleet", arn("instance/*"), clusterTags("other")}, false},
		{"fleet: untagged instance", request{"ec2:CreateFleet", arn("instance/*"), nil}, false},
		{"run: volume tagged for the cluster", request{"ec2:RunInstances", arn("volume/*"), clusterTags(testCluster)}, true},
		{"fleet: the cluster's launch template", request{"ec2:CreateFleet", arn("launch-template/lt-1"), map[string]string{"aws:ResourceTag/millwright.dev/cluster": testCluster}}, true},
		{"fleet: someone else's launch template", request{"ec2:CreateFleet", arn("launch-template/lt-1"), nil}, false},
		{"fleet: subnet", request{"ec2:CreateFleet", "arn:aws:ec2:" + testRegion + ":" + testAccount + ":subnet/subnet-1", nil}, true},
		{"fleet: public image", request{"ec2:RunInstances", "arn:aws:ec2:" + testRegion + "::image/ami-1", nil}, true},
		{"fleet: network interface", request{"ec2:RunInstances", arn("network-interface/*"), nil}, true},

		{"create launch template for the cluster", request{"ec2:CreateLaunchTemplate", arn("launch-template/*"), launchTemplateTags(testCluster)}, true},
		{"create untagged launch template", request{"ec2:CreateLaunchTemplate", arn("launch-template/*"), nil}, false},
		{"tag an instance while launching it", request{"ec2:CreateTags", arn("instance/i-1"), with(clusterTags(testCluster), "ec2:CreateAction", "CreateFleet")}, true},
		{"tag a launch template while creating it", request{"ec2:CreateTags", arn("launch-template/lt-1"), with(launchTemplateTags(testCluster), "ec2:CreateAction", "CreateLaunchTemplate")}, true},
		{"retag an existing instance", request{"ec2:CreateTags", arn("instance/i-1"), clusterTags(testCluster)}, false},
		{"tag a security group", request{"ec2:CreateTags", arn("security-group/sg-1"), with(clusterTags(testCluster), "ec2:CreateAction", "CreateFleet")}, false},

		{"terminate the cluster's instance", request{"ec2:TerminateInstances", arn("instance/i-1"), map[string]string{"aws:ResourceTag/kubernetes.io/cluster/" + testCluster: "owned"}}, true},
		{"terminate another cluster's instance", request{"ec2:TerminateInstances", arn("instance/i-1"), map[string]string{"aws:ResourceTag/kubernetes.io/cluster/other": "owned"}}, false},
		{"terminate an untagged instance", request{"ec2:TerminateInstances", arn("instance/i-1"), nil}, false},
		{"delete the cluster's launch template", request{"ec2:DeleteLaunchTemplate", arn("launch-template/lt-1"), map[string]string{"aws:ResourceTag/millwright.dev/cluster": testCluster}}, true},
		{"delete another launch template", request{"ec2:DeleteLaunchTemplate", arn("launch-template/lt-1"), map[string]string{"aws:ResourceTag/millwright.dev/cluster": "other"}}, false},

		{"pass the node role to EC2", request{"iam:PassRole", "arn:aws:iam::" + testAccount + ":role/" + testRole, map[string]string{"iam:PassedToService": "ec2.amazonaws.com"}}, true},
		{"pass the node role to Lambda", request{"iam:PassRole", "arn:aws:iam::" + testAccount + ":role/" + testRole, map[string]string{"iam:PassedToService": "lambda.amazonaws.com"}}, false},
		{"pass another role", request{"iam:PassRole", "arn:aws:iam::" + testAccount + ":role/Admin", map[string]string{"iam:PassedToService": "ec2.amazonaws.com"}}, false},

		{"receive from the interruption queue", request{"sqs:ReceiveMessage", "arn:aws:sqs:" + testRegion + ":" + testAccount + ":" + testQueue, nil}, true},
		{"delete from the interruption queue", request{"sqs:DeleteMessage", "arn:aws:sqs:" + testRegion + ":" + testAccount + ":" + testQueue, nil}, true},
		{"receive from another queue", request{"sqs:ReceiveMessage", "arn:aws:sqs:" + testRegion + ":" + testAccount + ":orders", nil}, false},
		{"send to the interruption queue", request{"sqs:SendMessage", "arn:aws:sqs:" + testRegion + ":" + testAccount + ":" + testQueue, nil}, false},
		{"run a command on an instance", request{"ssm:SendCommand", "*", nil}, false},
		{"read a public AMI parameter", request{"ssm:GetParameter", "arn:aws:ssm:" + testRegion + "::parameter/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", nil}, true},
		{"read a private parameter", request{"ssm:GetParameter", "arn:aws:ssm:" + testRegion + ":" + testAccount + ":parameter/db/password", nil}, false},

		{"create the cluster's instance profile", request{"iam:CreateInstanceProfile", profileARN(testCluster), profileTags(testCluster)}, true},
		{"create an untagged instance profile", request{"iam:CreateInstanceProfile", profileARN(testCluster), nil}, false},
		{"create a profile on another cluster's path", request{"iam:CreateInstanceProfile", profileARN("other"), profileTags("other")}, false},
		{"add a role to the cluster's profile", request{"iam:AddRoleToInstanceProfile", profileARN(testCluster), nil}, true},
		{"delete the cluster's profile", request{"iam:DeleteInstanceProfile", profileARN(testCluster), nil}, true},
		{"delete another profile", request{"iam:DeleteInstanceProfile", "arn:aws:iam::" + testAccount + ":instance-profile/Admin", nil}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := doc.allows(tc.request); got != tc.want {
				t.Errorf("allows(%s on %s with %v) = %v, want %v", tc.action, tc.resource, tc.context, got, tc.want)
			}
		})
	}
}
