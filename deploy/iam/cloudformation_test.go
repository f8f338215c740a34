package iam

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// intrinsic is a CloudFormation short-form function (!Ref, !Sub, !GetAtt)
// as the template parser keeps it.
type intrinsic struct {
	Function string
	Argument any
}

// decodeTemplate turns CloudFormation YAML into plain values, keeping the
// short-form intrinsic tags (a plain YAML decoder rejects or drops them).
func decodeTemplate(node *yaml.Node) (any, error) {
	switch node.Kind {
	case yaml.DocumentNode:
		return decodeTemplate(node.Content[0])
	case yaml.MappingNode:
		out := map[string]any{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			value, err := decodeTemplate(node.Content[i+1])
			if err != nil {
				return nil, err
			}
			out[node.Content[i].Value] = value
		}
		return tagged(node, out)
	case yaml.SequenceNode:
		out := []any{}
		for _, item := range node.Content {
			value, err := decodeTemplate(item)
			if err != nil {
				return nil, err
			}
			out = append(out, value)
		}
		return tagged(node, out)
	case yaml.ScalarNode:
		if strings.HasPrefix(node.Tag, "!") && !strings.HasPrefix(node.Tag, "!!") {
			return tagged(node, node.Value)
		}
		var value any
		if err := node.Decode(&value); err != nil {
			return nil, fmt.Errorf("line %d: %w", node.Line, err)
		}
		return value, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", node.Line, node.Kind)
}

var intrinsicTags = []string{"!Ref", "!Sub", "!GetAtt", "!Join", "!Select", "!Split", "!If", "!Equals", "!Not", "!FindInMap", "!ImportValue", "!Base64"}

func tagged(node *yaml.Node, value any) (any, error) {
	if !strings.HasPrefix(node.Tag, "!") || strings.HasPrefix(node.Tag, "!!") {
		return value, nil
	}
	if !slices.Contains(intrinsicTags, node.Tag) {
		return nil, fmt.Errorf("line %d: unknown CloudFormation function %s", node.Line, node.Tag)
	}
	return intrinsic{Function: node.Tag, Argument: value}, nil
}

func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal(InterruptionQueueTemplate, &root); err != nil {
		t.Fatalf("interruption-queue.cfn.yaml: %v", err)
	}
	decoded, err := decodeTemplate(&root)
	if err != nil {
		t.Fatalf("interruption-queue.cfn.yaml: %v", err)
	}
	return decoded.(map[string]any)
}

// dig follows keys through nested maps; nil when a key is missing.
func dig(value any, keys ...string) any {
	for _, key := range keys {
		m, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		value = m[key]
	}
	return value
}

func TestTemplateReferencesResolve(t *testing.T) {
	template := loadTemplate(t)
	resources, _ := template["Resources"].(map[string]any)
	parameters, _ := template["Parameters"].(map[string]any)
	if _, ok := parameters["ClusterName"]; !ok {
		t.Fatal("Parameters: ClusterName missing")
	}
	// Every !Ref, !GetAtt and ${Name} in !Sub names a parameter or resource.
	var walk func(any)
	walk = func(value any) {
		switch v := value.(type) {
		case intrinsic:
			var names []string
			switch v.Function {
			case "!Ref":
				names = []string{v.Argument.(string)}
			case "!GetAtt":
				names = []string{strings.SplitN(v.Argument.(string), ".", 2)[0]}
			case "!Sub":
				for _, part := range strings.Split(v.Argument.(string), "${")[1:] {
					names = append(names, strings.SplitN(part, "}", 2)[0])
				}
			}
			for _, name := range names {
				_, isResource := resources[name]
				_, isParameter := parameters[name]
				if !isResource && !isParameter && !strings.HasPrefix(name, "AWS::") {
					t.Errorf("%s %v: %s is neither a parameter nor a resource", v.Function, v.Argument, name)
				}
			}
			walk(v.Argument)
		case map[string]any:
			for _, item := range v {
				walk(item)
			}
		case []any:
			for _, item := range v {
				walk(item)
			}
		}
	}
	walk(template)
	for _, output := range []string{"QueueName", "QueueArn", "QueueUrl"} {
		if dig(template, "Outputs", output, "Value") == nil {
			t.Errorf("Outputs.%s.Value missing", output)
		}
	}
}

func TestQueueIsEncryptedAndOpenToEventBridgeOnly(t *testing.T) {
	template := loadTemplate(t)
	queue := dig(template, "Resources", "InterruptionQueue")
	if dig(queue, "Type") != "AWS::SQS::Queue" {
		t.Fatalf("InterruptionQueue.Type = %v", dig(queue, "Type"))
	}
	if dig(queue, "Properties", "SqsManagedSseEnabled") != true {
		t.Error("InterruptionQueue: SqsManagedSseEnabled must be true")
	}
	policy := dig(template, "Resources", "InterruptionQueuePolicy")
	statements, _ := dig(policy, "Properties", "PolicyDocument", "Statement").([]any)
	var allowedServices []string
	for _, s := range statements {
		if dig(s, "Effect") == "Allow" {
			if dig(s, "Action") != "sqs:SendMessage" {
				t.Errorf("queue policy allows %v; only sqs:SendMessage is needed", dig(s, "Action"))
			}
			for _, service := range dig(s, "Principal", "Service").([]any) {
				allowedServices = append(allowedServices, service.(string))
			}
		}
	}
	slices.Sort(allowedServices)
	if want := []string{"events.amazonaws.com", "sqs.amazonaws.com"}; !slices.Equal(allowedServices, want) {
		t.Errorf("queue policy principals = %v, want %v", allowedServices, want)
	}
}

// TestRulesFeedTheQueue checks each event the interruption poller handles
// (worker/interruption/message.go) has a rule sending it to the queue.
func TestRulesFeedTheQueue(t *testing.T) {
	template := loadTemplate(t)
	type pattern struct{ source, detailType string }
	want := map[pattern]bool{
		{"aws.ec2", "EC2 Spot Instance Interruption Warning"}: false,
		{"aws.ec2", "EC2 Instance Rebalance Recommendation"}:  false,
		{"aws.ec2", "EC2 Instance State-change Notification"}: false,
		{"aws.health", "AWS Health Event"}:                    false,
	}
	resources := template["Resources"].(map[string]any)
	for name, resource := range resources {
		if dig(resource, "Type") != "AWS::Events::Rule" {
			continue
		}
		targets, _ := dig(resource, "Properties", "Targets").([]any)
		if len(targets) != 1 {
			t.Errorf("%s: %d targets, want the queue only", name, len(targets))
			continue
		}
		target, ok := dig(targets[0], "Arn").(intrinsic)
		if !ok || target.Function != "!GetAtt" || target.Argument != "InterruptionQueue.Arn" {
			t.Errorf("%s: target %v, want !GetAtt InterruptionQueue.Arn", name, dig(targets[0], "Arn"))
		}
		eventPattern := dig(resource, "Properties", "EventPattern")
		sources, _ := dig(eventPattern, "source").([]any)
		detailTypes, _ := dig(eventPattern, "detail-type").([]any)
		if len(sources) != 1 || len(detailTypes) != 1 {
			t.Errorf("%s: want one source and one detail-type, got %v / %v", name, sources, detailTypes)
			continue
		}
		p := pattern{sources[0].(string), detailTypes[0].(string)}
		if _, known := want[p]; !known {
			t.Errorf("%s: pattern %v is not an event the poller handles", name, p)
			continue
		}
		want[p] = true
		if p.source == "aws.health" {
			if services, _ := dig(eventPattern, "detail", "service").([]any); !slices.Equal(services, []any{"EC2"}) {
				t.Errorf("%s: detail.service = %v, want [EC2]", name, services)
			}
			if categories, _ := dig(eventPattern, "detail", "eventTypeCategory").([]any); !slices.Equal(categories, []any{"scheduledChange"}) {
				t.Errorf("%s: detail.eventTypeCategory = %v, want [scheduledChange]", name, categories)
			}
		}
	}
	for p, found := range want {
		if !found {
			t.Errorf("no rule sends %s %q to the queue", p.source, p.detailType)
		}
	}
}
