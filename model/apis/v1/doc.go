// Package v1 owns Millwright's user-facing API, group millwright.dev version
// v1: the NodePool, EC2NodeClass and NodeClaim types, their CRD markers (OpenAPI schema
// and CEL rules), defaulting, Go-side validation with the same rules, and the
// small read helpers other packages use (durations, budgets, limits, AMI
// family). Field names and semantics follow Karpenter's karpenter.sh/v1 and
// karpenter.k8s.aws/v1 APIs so a manifest migrates by changing its apiVersion
// (and nodeClassRef.group).
//
// It must not talk to a cluster or to AWS, and must not hold scheduling logic:
// requirement algebra lives in model/scheduling, packing in model/packer.
//
// Regenerate deepcopy and the CRD manifests in deploy/crds after changing a
// type or a marker (run from the repository root):
//
//	go generate ./model/apis/v1
//
// +groupName=millwright.dev
// +kubebuilder:object:generate=true
package v1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./...
//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd:crdVersions=v1 paths=./... output:crd:artifacts:config=../../../deploy/crds
//go:generate go run ./internal/crdpatch ../../../deploy/crds
