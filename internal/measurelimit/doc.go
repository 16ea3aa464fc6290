// Package measurelimit holds the bounds on a calibration measurement that
// both sides of the wire enforce: the master's replicated state refuses a
// measurement beyond them (internal/state.CheckMeasurement) and ginctl
// refuses to send one (internal/calib.Points). It imports nothing, so a
// client that checks a bound does not link the state or the graph.
package measurelimit
