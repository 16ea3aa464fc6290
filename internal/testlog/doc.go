// Package testlog holds what tests use to capture logs and process output
// written from other goroutines: a Buffer safe for concurrent writes and
// reads. Only tests import it.
package testlog
