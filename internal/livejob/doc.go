// Package livejob is the leader's live view of running jobs: it keeps the
// recent windows every rank's profiler reported (through its node's agent,
// LiveService.ReportRanks), joins a job's ranks by communicator, and names
// suspects with the numbers that show them:
//
//   - slow-link: a rank whose network sends take markedly longer per byte
//     than the job's median rank's, seen from the ranks receiving from it
//     too; named as its node and NIC (the rail) and the switch that NIC is
//     cabled to.
//   - straggler: a rank whose collectives are markedly shorter than its
//     peers' because they wait for it (it arrives last); named as its node
//     and GPU, with how late it arrives at sampled collectives.
//   - hang: ranks whose progress stopped (silent, or never entered the
//     collective) while their peers have waited in one for longer than
//     HangAfter; named as node and GPU.
//
// A verdict reads only the job's own ranks (robust medians, so a minority
// of ranks cannot make the rest look slow) and holds no suspect without the
// evidence: a rank needs enough steps, bytes and collectives in its recent
// windows, and a comm needs at least three ranks with data. A suspect is
// confirmed once its condition held over Confirm evaluations in a row, and
// cleared after Clear evaluations without it. State is memory only and
// bounded (MaxJobs, MaxRanksPerJob, Keep windows a rank); a new leader
// rebuilds it from the next windows.
//
// Data flow: the profiler plugin (internal/ncclplugin/profiler) → the
// agent's node socket (internal/rankreport, internal/livereport) → the
// master (LiveService) → livejob → ginctl job report / job watch, metrics.
package livejob
