// Package apierr holds what the master and its clients (ginctl, the agent,
// the NCCL tuner plugin) must agree on in gRPC errors beyond the status
// code: the errdetails.ErrorInfo reasons GIN attaches. The master maps its
// errors to statuses in one place (internal/master/errors.go); clients use
// the predicates here to tell a redirect from a refusal.
package apierr
