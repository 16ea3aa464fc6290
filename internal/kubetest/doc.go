// Package kubetest runs a real Kubernetes API server for the tests: etcd
// (Debian's etcd-server) and kube-apiserver on free loopback ports, RBAC on,
// static-token users, a kubeconfig per user, and kubectl beside it. There
// is no kubelet, scheduler or controller-manager: Nodes, labels, taints,
// Secrets, CRDs and custom objects, RBAC, watches and server-side dry-run
// are the real thing; Pods are accepted but never run.
//
// kube-apiserver and kubectl are not packaged by Debian: scripts/k8s-harness.sh
// build compiles them from the Go module proxy (k8s.io/kubernetes at
// Version) into the cache directory BinDir names, once per machine; Find
// reports what is missing. Only tests import this package.
package kubetest
