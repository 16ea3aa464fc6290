package faulttest

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestRegisterModel checks the checker (no root, no processes): it accepts
// first-wins creates, unknown creates that may or may not have applied, and
// rejects a stale read and a lost acknowledged write.
func TestRegisterModel(t *testing.T) {
	op := func(c int, in regInput, call int64, out regOutput, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	create := func(k, v string) regInput { return regInput{Key: k, Create: true, Value: v} }
	get := func(k string) regInput { return regInput{Key: k} }
	inf := int64(math.MaxInt64)
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"concurrent creates, first wins", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Value: "y"}, 10),
			op(1, create("a", "y"), 1, regOutput{Value: "y"}, 5),
			op(2, get("a"), 11, regOutput{Value: "y"}, 12),
		}, porcupine.Ok},
		{"unknown create applied later", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Unknown: true}, inf),
			op(1, get("a"), 5, regOutput{}, 6),
			op(2, get("a"), 7, regOutput{Value: "x"}, 8),
		}, porcupine.Ok},
		{"unknown create never applied", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Unknown: true}, inf),
			op(1, create("a", "y"), 5, regOutput{Value: "y"}, 6),
			op(2, get("a"), 7, regOutput{Value: "y"}, 8),
		}, porcupine.Ok},
		{"stale read after an acknowledged create", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Value: "x"}, 2),
			op(1, get("a"), 3, regOutput{}, 4),
		}, porcupine.Illegal},
		{"pinned value replaced", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Value: "x"}, 2),
			op(1, create("a", "y"), 3, regOutput{Value: "y"}, 4),
		}, porcupine.Illegal},
		{"keys are independent", []porcupine.Operation{
			op(0, create("a", "x"), 0, regOutput{Value: "x"}, 2),
			op(1, get("b"), 3, regOutput{}, 4),
		}, porcupine.Ok},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(registerModel, c.ops); (got && c.want != porcupine.Ok) || (!got && c.want == porcupine.Ok) {
			t.Errorf("%s: linearizable=%v, want %s", c.name, got, c.want)
		}
	}
}
