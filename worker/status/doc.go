// Package status owns what `kubectl get` and `kubectl describe` show about
// NodePools and EC2NodeClasses: it writes their status subresources.
//
//   - A NodePool's status counts the Nodes labelled with it
//     (millwright.dev/nodepool), sums their capacity (plus a "nodes" count,
//     as Karpenter does), and carries the conditions ValidationSucceeded
//     (the API's own Validate, naming the broken field), NodeClassReady (the
//     referenced EC2NodeClass exists and is Ready) and Ready (all of them).
//   - An EC2NodeClass's status lists the subnets, security groups, AMIs and
//     instance profile its selector terms resolve to — through the EC2
//     provider's NodeClassResolver, the one launches use, so status shows
//     what a launch would get — with ValidationSucceeded, per-part conditions
//     and Ready, which names what did not resolve. Classes are re-resolved
//     every few minutes and whenever their spec changes.
//
// Each kind has a small controller in the style of Karpenter's: informer
// events enqueue a name on a rate-limited workqueue, one reconcile computes
// the status from the informer caches (and, for classes, EC2), and a merge
// patch on the status subresource is sent only when the status changed,
// with the object's resourceVersion as a precondition so that concurrent
// workers (HA) never overwrite each other blindly; a conflict requeues.
//
// The package only reports: it never changes a spec, launches or removes
// anything, and nothing reads these statuses to make decisions (the planner
// validates and resolves for itself).
package status
