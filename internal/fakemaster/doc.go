// Package fakemaster is a test double of a gin-master's PlanService on a
// real gRPC listener: a master answering NOT_LEADER (one older than
// forwarding, or during an election), a leader that returns a
// verifiable plan, or a fixed refusal, in plaintext or over TLS (ServeTLS,
// with ClientTLS for the other side). Clients of the masters (the plugin's
// fallback, the agent's plan fetch, the agent's and internal/dialerr's TLS
// mismatch tests) test against it.
package fakemaster
