// Package nccltests reads nccl-tests output (all_reduce_perf and friends)
// as users post it: a terminal capture, a Slurm or OpenMPI log with
// launcher prefixes, NCCL_DEBUG noise mixed in, several tests in one file.
//
// Parse returns every test run it finds: the header (nThread/nGpus, the
// "# Using devices" rank lines, so nodes and GPUs per node), the NCCL
// version, the NCCL_* variables NCCL reports as "set by environment"
// (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, …), the NCCL TUNING choices
// when the log has them, the out-of-place/in-place table and the
// "# Avg bus bandwidth" footer.
//
// It is tolerant where the format varies (reference nccl-tests-format.md):
// v1 tables in milliseconds, the `error` and `#wrong` columns, N/A, %g
// exponents, in-place-only tables, -I and -S extra columns, CRLF,
// `[1,0]<stdout>:`, `0: ` and `[0] ` prefixes, timestamps, debug lines
// inside the table and rows split by a TUNING line. What it cannot read
// inside a table is an error that names the line; lines outside tables
// that are not nccl-tests' or NCCL's are ignored. Sizes are bounded
// (MaxLineBytes, MaxRows, MaxRuns, MaxRanks).
package nccltests
