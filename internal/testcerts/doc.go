// Package testcerts makes a cluster CA and certificates for the tests and
// benchmarks on real processes (the fault campaign, e2e) with the real
// `ginctl tls ca create` and `ginctl tls cert create` commands, as the
// README tells an operator to, and hands out the --tls-ca/--tls-cert/
// --tls-key flags and the files of each. Only tests import it.
package testcerts
