// Package testproc runs GIN's own binaries as real child processes for the
// end-to-end tests, the fault campaign and the benchmarks on real
// processes: Build compiles the commands once per test, Proc starts one of
// them (restartable with the same command line), appends its output to a
// log file and makes it die with the test binary; MainOrTests and RunSelf
// run a command's test binary as the command itself, for its real exit
// status. Only tests import it.
package testproc
