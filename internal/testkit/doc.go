// Package testkit holds the helpers GIN's tests share, one file per
// concern:
//
//   - wait.go: bounded polling (WaitFor, WaitUntil) instead of a
//     hand-written deadline loop or a sleep that hopes;
//   - proc.go: GIN's own binaries built once per test (BuildCommands) and
//     run as real, restartable child processes (Proc);
//   - self.go: a command's test binary run as the command itself
//     (MainOrTests, RunSelf), for its real exit status;
//   - certs.go: a cluster CA and certificates made, and reissued in place,
//     with the real `ginctl tls` commands (MakeCerts, CertDir);
//   - tmpfs.go: a real small filesystem for the disk-full tests
//     (MountTmpfs, FillTmpfs, FreeTmpfs, ResizeTmpfs);
//   - log.go: a log buffer safe for concurrent writes and reads
//     (LogBuffer).
//
// Only tests import it (internal/archtest checks that no production
// package depends on it).
package testkit
