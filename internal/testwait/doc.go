// Package testwait is the one polling helper of the tests: wait, bounded,
// until a condition holds, instead of a hand-written deadline loop (or a
// sleep that hopes the condition holds by then) in every test file.
package testwait
