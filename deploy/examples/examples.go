// Package examples owns the example manifests a newcomer applies first (the
// default EC2NodeClass and NodePool) and embeds them so the demo and the
// local stack can apply exactly what the docs show. model/apis/v1 tests
// validate them. karpenter/ holds Karpenter's published example
// configurations in their Karpenter form (karpenter.sh/v1), which
// `starter migrate` converts; the migrate and e2e tests apply them.
package examples

import (
	"embed"
	_ "embed"
)

// Karpenter holds karpenter/*.yaml, Karpenter's example configurations as
// a Karpenter user has them.
//
//go:embed karpenter/*.yaml
var Karpenter embed.FS

// NodeClass is nodeclass.yaml: EC2NodeClass "default".
//
//go:embed nodeclass.yaml
var NodeClass []byte

// NodePool is nodepool.yaml: NodePool "default".
//
//go:embed nodepool.yaml
var NodePool []byte
