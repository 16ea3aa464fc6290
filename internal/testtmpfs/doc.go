// Package testtmpfs gives the disk-full tests a real small filesystem: Mount
// mounts a tmpfs of a given size on a temporary directory (root only; the
// test is skipped otherwise, and fails instead when REQUIRE_FAULT_TESTS=1,
// as in CI), Fill takes its free space away with a ballast file and Free
// gives it back. Only tests import it.
package testtmpfs
