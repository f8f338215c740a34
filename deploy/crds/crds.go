// Package crds owns Millwright's CustomResourceDefinition manifests
// (millwright.dev NodePool, EC2NodeClass and NodeClaim), generated from model/apis/v1 by
// controller-gen, and embeds them so the local stack and tests can install
// them without locating files on disk. Do not edit the YAML by hand:
// regenerate with `go generate ./model/apis/v1`.
package crds

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var manifests embed.FS

// File names of the manifests.
const (
	EC2NodeClassFile = "millwright.dev_ec2nodeclasses.yaml"
	NodePoolFile     = "millwright.dev_nodepools.yaml"
	NodeClaimFile    = "millwright.dev_nodeclaims.yaml"
)

// All returns every CRD manifest, keyed by file name.
func All() map[string][]byte {
	out := map[string][]byte{}
	names, _ := fs.Glob(manifests, "*.yaml")
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			// Unreachable: the names come from the embedded FS itself.
			panic(err)
		}
		out[name] = data
	}
	return out
}

// Get returns one manifest by file name.
func Get(name string) ([]byte, error) { return manifests.ReadFile(name) }
