// Package e2e holds end-to-end tests that build the real binaries and run
// them as separate processes on loopback: gin-master --dev, gin-agent and
// ginctl, exactly as the README and docs/ tell a newcomer to.
package e2e
