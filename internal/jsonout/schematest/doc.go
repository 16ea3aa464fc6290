// Package schematest checks JSON documents against the JSON Schemas that
// jsonout generates, with a complete draft 2020-12 validator
// (santhosh-tekuri/jsonschema). Only tests import it.
package schematest
