// Package examples owns the example manifests a newcomer applies first (the
// default EC2NodeClass and NodePool) and embeds them so the demo and the
// local stack can apply exactly what the docs show. model/apis/v1 tests
// validate them.
package examples

import _ "embed"

// NodeClass is nodeclass.yaml: EC2NodeClass "default".
//
//go:embed nodeclass.yaml
var NodeClass []byte

// NodePool is nodepool.yaml: NodePool "default".
//
//go:embed nodepool.yaml
var NodePool []byte
