// Package jsonout is the one JSON convention of GIN's command lines: every
// `-o json` of ginctl and `gin-agent --once -o json` is written by Write or
// WriteLine, and its JSON Schema comes from Schema. The rules (documented
// for users in docs/JSON.md):
//
//   - a protobuf message is an object with its .proto field names, in the
//     order the .proto declares them; a Go struct is an object with its
//     `json` tag names in declaration order (omitempty is ignored);
//   - every field is present: zero numbers, "" strings, false, [] for empty
//     lists, {} for empty maps, null for an unset message;
//   - enum values are the lowercase word after the enum's prefix, as the
//     tables print them: NODE_STATE_UP is "up", ALGORITHM_NVLS_TREE is
//     "nvls_tree", the zero value is "unspecified";
//   - 64-bit integers are JSON numbers (not strings); floating-point values
//     are numbers and must be finite;
//   - google.protobuf.Timestamp is an RFC 3339 string in UTC,
//     google.protobuf.Duration a decimal number of seconds with an "s"
//     suffix ("1.5s"), bytes are standard base64;
//   - map keys are sorted, so the output of the same value is the same bytes.
package jsonout
