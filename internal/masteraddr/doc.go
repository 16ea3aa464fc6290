// Package masteraddr parses the list of Gin master addresses.
//
// Agents, ginctl and the NCCL plugin all learn where the masters are from the
// same setting: the --master flag or, when the flag is not given, the
// GIN_MASTER_HOST environment variable, falling back to DefaultMaster. The
// value is a comma-separated list whose entries are written as
//
//	host            host:port
//	IPv4            IPv4:port
//	[IPv6]          [IPv6]:port
//	IPv6                                 (bare, e.g. ::1 or fe80::1%eth0)
//
// An entry with more than one colon and no brackets is a bare IPv6 address
// and never has a port; write [IPv6]:port to give one. Entries without a port
// use DefaultPort.
//
// Parse validates and normalises the list to "host:port" strings as built by
// net.JoinHostPort, so every result can be split again with
// net.SplitHostPort and dialled directly. FromEnv applies the
// flag/environment precedence.
//
// StartIndex, MoveFrom and Home are where in that list a node's agent
// starts, moves to when its master fails, and returns to: gin-agent's rule,
// which the tests that simulate many agents call too.
package masteraddr
