// Package scheduling owns Millwright's scheduling vocabulary: the well-known
// node labels (and the Karpenter keys accepted as aliases), the requirements
// algebra over label keys (In, NotIn, Exists, DoesNotExist, Gt, Lt), taints and
// tolerations, fixed-size resource vectors, and a pod's effective requests.
//
// It is pure data and rules: it knows nothing about instance types, NodePools
// or the packer, and it must not import them (they import it).
package scheduling
