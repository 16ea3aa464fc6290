// Package master is gin-master's service layer: the gRPC services every
// master answers, the leader-only loops, and the wiring between them and
// internal/raft (writes: the FSM applies them to internal/state) and
// internal/state (reads, on any replica, stating the index they were
// served at).
//
// # Parts
//
// Server (server.go) wires the parts and owns nothing else: the Raft
// node, the listeners and the leadership lifecycle (leadership.go,
// Nomad's shape: leader-only loops run exactly while this master leads).
// A part is its own type in its own file, given what it needs (a state
// view, an apply or read function, a clock, a logger, its config; parts.go
// names the function types) rather than the Server. The parts stay in this
// package, named types and files rather than subpackages, because they
// share its unexported error kinds (errors.go) and the gRPC server; the
// split is by type and constructor, and archtest guards the rules between
// them:
//
//   - forwarder (forward.go): a follower forwards writes, and any call its
//     handler refuses as NOT_LEADER, to the leader; clients follow no
//     hints.
//   - leaderLink (leaderlink.go): a follower's one connection to the
//     leader (relayed agent writes, session reports, forwarded calls) and
//     what the reports say about reaching it.
//   - agent sessions (agent_service.go, sessions.go): a session per agent
//     on any master, agentService given the parts and functions it calls;
//     handshakes admitted by slots and by rate (admission.go); whether
//     this master takes sessions (sessionhealth.go); pinned plans pushed
//     to sessions (planpush.go); a session's long-lived goroutine only
//     receives (freshstack.go).
//   - follower reporting (relay.go, relay_service.go, reports.go,
//     reportdelta.go): agent writes relayed to the leader, sessions
//     reported to it as deltas; relayService, the leader's side, is given
//     the store, the liveness and the functions it calls.
//   - liveness (liveness.go): the leader's node states from its sessions
//     and the reports (leader-only: rearm/deactivate).
//   - services, each its own type over the store and the functions of
//     parts.go: topologyService (topology_service.go), planService
//     (plan_service.go, estimate_service.go; plan expiry is a leader-only
//     loop), checkService (check_service.go), calibrationService
//     (calibration_service.go), adminService (admin_service.go: fabric
//     import, deny list, node delete; cluster.go, joinadmission.go:
//     membership, with the Raft node). webBackend (webui_backend.go) is the
//     web view's reads through their methods.
//   - Config (config.go): every knob, DefaultConfig and Validate, and the
//     Clock type of its clocks.
//   - errors.go: the one table where internal errors become gRPC
//     statuses.
//
// Every ...Service type is cut loose: archtest keeps each from holding
// *Server (issue #25).
package master
