package jsonout

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// WriteYAML writes v as YAML: the same document Write prints (same keys,
// same order, same values), in YAML's block style.
func WriteYAML(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil { // JSON is YAML
		return fmt.Errorf("yaml: %w", err)
	}
	plain(&doc)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("yaml: write: %w", err)
	}
	return nil
}

// plain drops the flow and quoting styles the JSON parse left, so the
// encoder writes block style and quotes only where YAML needs it; strings
// that YAML 1.1 readers (PyYAML) take for booleans stay quoted.
func plain(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && yaml11Bool(n.Value) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		plain(c)
	}
}

func yaml11Bool(s string) bool {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false":
		return true
	}
	return false
}
