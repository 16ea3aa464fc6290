// Package nodelabels is the contract of the Kubernetes Node labels GIN
// keeps (gin-master --kube-labels, internal/kubelabels) and that schedulers
// read: the keys under Prefix and topograph's, the taint, how a name
// becomes a label value, and the Kueue Topology whose levels are those
// keys (ginctl export kueue). It imports nothing of GIN's and no
// Kubernetes library, so that ginctl can use it without client-go.
package nodelabels
