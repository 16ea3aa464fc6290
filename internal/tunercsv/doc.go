// Package tunercsv writes a job's pinned plan as the configuration file of
// NVIDIA's example NCCL tuner (plugins/tuner/example in NCCL, ext-tuner/
// example up to 2.28), the CSV that plugin reads from the file named by
// NCCL_TUNER_CONFIG_FILE:
//
//	collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
//
// one row per line, -1 for "any" (channels -1: the example's default),
// inclusive byte ranges, '#' comment lines, at most 256 bytes a line. The
// example takes the first row that matches and whose cost-table cell NCCL
// marks usable, and forces that cell.
//
// A plan rule's forcing choices become consecutive rows in preference
// order, for the rule's exact shape (nNodes, nRanks) and the byte range of
// its log2 buckets. The example has no row meaning "leave it to NCCL", so
// a rule that leaves the choice to NCCL (planread.Overrides false) has no
// rows, and a rule's choices stop at its first choice that leaves it to
// NCCL (NCCL's choice, or NCCL's choice when it offers an algorithm): the
// choices after it, which GIN's plugin tries only when NCCL does not offer
// that algorithm, cannot be expressed and are named in a comment. The
// version rule (measured choices apply only on the NCCL release series
// they were measured on) cannot be expressed either; such rows say so.
//
// Render is a pure function of the plan; an algorithm, protocol or
// collective that NCCL's example cannot name is an error, never a row (the
// example silently reads an unknown name as ring or simple).
package tunercsv
