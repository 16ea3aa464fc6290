// Package hostlist parses and prints Slurm hostlist expressions.
//
// Gin accepts node sets in Slurm's compact syntax wherever a list of hosts is
// given: the --nodes flags of the command-line tools, the node sets of plan
// requests, and node lists handed over by Slurm itself (SLURM_JOB_NODELIST,
// "scontrol show hostnames" input). Expand turns such an expression into the
// individual host names; Compress turns a set of host names back into a
// compact expression for display.
//
// The grammar accepted by Expand is:
//
//	list  = item { "," item }
//	item  = part { part }                  (whitespace around an item is ignored)
//	part  = name | "[" range { "," range } "]"
//	range = number [ "-" number ]
//	name  = 1*( ALPHA | DIGIT | "." | "_" | "-" )
//	number = 1*DIGIT
//
// An item with several bracket groups expands to the cartesian product of its
// groups, with the leftmost group varying slowest, as Slurm does:
// "a[1-2]b[1-2]" is a1b1, a1b2, a2b1, a2b2. Numbers are zero-padded to the
// width of the lower bound as written ("n[08-11]" is n08, n09, n10, n11).
//
// Expansion is bounded: an expression may name at most MaxHosts hosts
// (counting duplicates) and no host name may be longer than MaxNameLen bytes.
// Both limits are checked before any name is generated, so hostile input such
// as "n[0-999999999]" fails immediately without allocating.
package hostlist
