// Package local is the local stack that stands in for the cloud account and
// the cluster, so Millwright runs, is demonstrated and is tested with the
// same code paths as production on one machine with no cloud account and no
// container engine:
//
//   - awsemu: EC2 and SQS emulated over HTTP for the real AWS SDK clients,
//     registering Nodes for the instances it "boots" and sending the
//     interruption events EC2 would;
//   - temporal: a real Temporal server (SQLite) and the real Temporal UI,
//     embedded;
//   - cluster: a real Kubernetes control plane (etcd, apiserver, scheduler,
//     controller manager) with kwok playing the kubelets;
//   - tools: the separately built binaries the cluster runs.
//
// `starter dev`, `make demo` and the integration tests bring these up. The
// product never imports this tree: it sees only endpoints and a kubeconfig.
package local
