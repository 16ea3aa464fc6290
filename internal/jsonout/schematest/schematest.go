package schematest

import (
	"bytes"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile parses a schema (checked against the draft 2020-12 meta-schema).
func Compile(name string, schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := "mem://" + name
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return s, nil
}

// Validate checks one JSON document (or, with lines, each line of a JSON
// Lines stream) against the schema.
func Validate(s *jsonschema.Schema, doc []byte, lines bool) error {
	docs := [][]byte{doc}
	if lines {
		docs = bytes.Split(bytes.TrimRight(doc, "\n"), []byte("\n"))
	}
	for i, d := range docs {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d))
		if err != nil {
			return fmt.Errorf("document %d is not JSON: %w", i+1, err)
		}
		if err := s.Validate(v); err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return nil
}
