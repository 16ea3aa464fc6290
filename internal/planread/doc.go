// Package planread reads a job's plan: it verifies one (format, content
// hash, rules that do not overlap), looks up the rule for a collective, a
// communicator shape and a message size, and explains a plan for humans.
// It works on the protobuf values alone: it never imports the graph, the
// cost model or anything that builds plans (internal/plan does that, on the
// master), so the NCCL plugin, the agent and ginctl can read plans without
// linking the builder. docs/ARCHITECTURE.md's layering test keeps it so.
package planread
