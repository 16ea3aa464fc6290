package jsonout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// SchemaDialect is the JSON Schema draft the schemas declare.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// Schema returns the JSON Schema (draft 2020-12, indented, newline at the
// end) of what Write prints for a value of sample's type; sample may be a
// typed nil ((*ginv1.Plan)(nil), []*ginv1.NodeSummary(nil)). Every message
// and struct is closed (additionalProperties false) and every field is
// required, as the convention writes every field.
func Schema(title string, sample any) ([]byte, error) {
	t := reflect.TypeOf(sample)
	if t == nil {
		return nil, fmt.Errorf("json schema %q: no type (an untyped nil)", title)
	}
	g := &schemaGen{defs: map[string]obj{}}
	root, err := g.goType(t, false)
	if err != nil {
		return nil, fmt.Errorf("json schema %q: %w", title, err)
	}
	out := obj{{"$schema", SchemaDialect}, {"title", title}}
	out = append(out, root...)
	if len(g.defs) > 0 {
		names := make([]string, 0, len(g.defs))
		for n := range g.defs {
			names = append(names, n)
		}
		sort.Strings(names)
		defs := make(obj, 0, len(names))
		for _, n := range names {
			defs = append(defs, member{n, g.defs[n]})
		}
		out = append(out, member{"$defs", defs})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("json schema %q: %w", title, err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return nil, fmt.Errorf("json schema %q: %w", title, err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// obj is a JSON object that keeps its key order.
type obj []member

type member struct {
	k string
	v any
}

// MarshalJSON writes the members in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type schemaGen struct {
	defs map[string]obj
}

func nullable(s obj) obj {
	return obj{{"anyOf", []any{s, obj{{"type", "null"}}}}}
}

// goType is the schema of a Go type; orNull when a nil of it is written as null.
func (g *schemaGen) goType(t reflect.Type, orNull bool) (obj, error) {
	if t.Implements(protoMessageType) {
		if t.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("%s: a message must be a pointer", t)
		}
		m, ok := reflect.Zero(t).Interface().(proto.Message)
		if !ok {
			return nil, fmt.Errorf("%s: not a message", t)
		}
		s, err := g.message(m.ProtoReflect().Descriptor())
		if err != nil || !orNull {
			return s, err
		}
		return nullable(s), nil
	}
	switch t {
	case timeType:
		return obj{{"type", "string"}, {"format", "date-time"}}, nil
	case durationType:
		return durationSchema(), nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.goType(t.Elem(), true)
	case reflect.Struct:
		props := obj{}
		var required []string
		for i := range t.NumField() {
			name, ok := fieldName(t.Field(i))
			if !ok {
				continue
			}
			s, err := g.goType(t.Field(i).Type, false)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t, t.Field(i).Name, err)
			}
			props = append(props, member{name, s})
			required = append(required, name)
		}
		return obj{{"type", "object"}, {"properties", props}, {"required", orEmpty(required)}, {"additionalProperties", false}}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return obj{{"type", "string"}, {"contentEncoding", "base64"}}, nil
		}
		items, err := g.goType(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		return obj{{"type", "array"}, {"items", items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		v, err := g.goType(t.Elem(), false)
		if err != nil {
			return nil, err
		}
		return obj{{"type", "object"}, {"additionalProperties", v}}, nil
	case reflect.String:
		return obj{{"type", "string"}}, nil
	case reflect.Bool:
		return obj{{"type", "boolean"}}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return obj{{"type", "integer"}}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return obj{{"type", "integer"}, {"minimum", 0}}, nil
	case reflect.Float32, reflect.Float64:
		return obj{{"type", "number"}}, nil
	case reflect.Interface:
		return obj{}, nil // anything
	}
	return nil, fmt.Errorf("%s: no JSON form", t)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func durationSchema() obj {
	return obj{{"type", "string"}, {"pattern", `^-?[0-9]+(\.[0-9]+)?s$`}}
}

// message is a $ref to the message's definition, added on first use.
func (g *schemaGen) message(md protoreflect.MessageDescriptor) (obj, error) {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return obj{{"type", "string"}, {"format", "date-time"}}, nil
	case "google.protobuf.Duration":
		return durationSchema(), nil
	}
	name := string(md.FullName())
	ref := obj{{"$ref", "#/$defs/" + name}}
	if _, ok := g.defs[name]; ok {
		return ref, nil
	}
	g.defs[name] = nil // placeholder: recursive messages refer to it
	props := obj{}
	required := []string{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		s, err := g.field(fd)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", name, fd.Name(), err)
		}
		props = append(props, member{string(fd.Name()), s})
		required = append(required, string(fd.Name()))
	}
	g.defs[name] = obj{{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}}
	return ref, nil
}

func (g *schemaGen) field(fd protoreflect.FieldDescriptor) (obj, error) {
	switch {
	case fd.IsList():
		items, err := g.kind(fd)
		if err != nil {
			return nil, err
		}
		return obj{{"type", "array"}, {"items", items}}, nil
	case fd.IsMap():
		v, err := g.kind(fd.MapValue())
		if err != nil {
			return nil, err
		}
		return obj{{"type", "object"}, {"additionalProperties", v}}, nil
	case fd.Message() != nil, fd.HasOptionalKeyword():
		s, err := g.kind(fd)
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	}
	return g.kind(fd)
}

// kind is the schema of one value of the field (an element, for lists).
func (g *schemaGen) kind(fd protoreflect.FieldDescriptor) (obj, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return g.message(fd.Message())
	case protoreflect.EnumKind:
		ed := fd.Enum()
		words := make([]string, 0, ed.Values().Len())
		for i := range ed.Values().Len() {
			words = append(words, EnumWord(ed, ed.Values().Get(i).Number()))
		}
		return obj{{"type", "string"}, {"enum", words}}, nil
	case protoreflect.StringKind:
		return obj{{"type", "string"}}, nil
	case protoreflect.BytesKind:
		return obj{{"type", "string"}, {"contentEncoding", "base64"}}, nil
	case protoreflect.BoolKind:
		return obj{{"type", "boolean"}}, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return obj{{"type", "integer"}}, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return obj{{"type", "integer"}, {"minimum", 0}}, nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return obj{{"type", "number"}}, nil
	}
	return nil, fmt.Errorf("unsupported field kind %s", fd.Kind())
}
