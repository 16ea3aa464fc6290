// Package ratelog bounds how many lines of one kind a process logs: a
// token bucket (rate lines per second, burst lines at once) that counts
// the lines it suppressed, so that the next line let through can say how
// many were left out and an operator sees the total in a metric. The
// master uses one per server for agent attach/detach lines, which a
// cluster-wide reconnect (or a flood of bad sessions) would otherwise
// write by the tens of thousands.
package ratelog
