// Package cluster owns the real Kubernetes control plane that local runs and tests
// use: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kwok
// controller, started as plain processes by `kwokctl create cluster --runtime binary`.
//
// It also owns getting those binaries: they are compiled from the pinned modules in
// local/tools (never downloaded) into a cache directory outside the repository on
// first use, and reused after. kwok plays the kubelet of every Node annotated
// kwok.x-k8s.io/node=fake and of nothing else, so Nodes registered by the EC2
// emulator become Ready and their pods Running exactly as on a real cluster.
//
// The package does not create Nodes or workloads; the emulator and the tests do.
// It never touches the user's ~/.kube/config or ~/.kwok.
package cluster
