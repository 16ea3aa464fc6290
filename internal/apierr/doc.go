// Package apierr is GIN's wire contract beyond the protos: what the master
// and every client (ginctl, the agent, the NCCL tuner plugin) must agree on
// in gRPC metadata and errors — the leader-hint key and the
// errdetails.ErrorInfo reasons GIN attaches — and how a client reads the
// RetryInfo delay a master attaches to a refusal (RetryHint). Nothing else
// declares them.
// The master maps its errors to statuses in one table
// (internal/master/errors.go); clients use the predicates here to tell a
// master that knows no leader (NOT_LEADER: another may answer) from a
// refusal, and internal/redirect to walk on.
package apierr
