package jsonout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxDepth bounds the nesting Unmarshal accepts (GIN's messages nest a few
// levels; a deeper document is not one of them).
const MaxDepth = 64

// Unmarshal reads into m a JSON document written by Write (enum words,
// numbers for 64-bit integers) or by protojson (enum names or numbers,
// strings for 64-bit integers). Unknown fields, a wrong type or a word
// that is not a value of the field's enum are errors that name the field;
// m is reset first.
func Unmarshal(b []byte, m proto.Message) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("json: more than one value")
	}
	if err := enumWordsToNames(doc, m.ProtoReflect().Descriptor(), "", 0); err != nil {
		return err
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	proto.Reset(m)
	if err := protojson.Unmarshal(canon, m); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// enumWordsToNames rewrites, in place, the enum words of a message's JSON
// object into the value names protojson reads.
func enumWordsToNames(doc any, md protoreflect.MessageDescriptor, path string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("json: %s: nested deeper than %d", orRoot(path), MaxDepth)
	}
	switch md.FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration":
		return nil // protojson reads RFC 3339 and "1.5s" itself
	}
	o, ok := doc.(map[string]any)
	if !ok {
		return nil // null or a wrong type: protojson says which
	}
	fields := md.Fields()
	for k, v := range o {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil {
			fd = fields.ByJSONName(k)
		}
		if fd == nil {
			return fmt.Errorf("json: %s: unknown field %q of %s", orRoot(path), k, md.FullName())
		}
		p := join(path, k)
		switch {
		case fd.IsList():
			l, ok := v.([]any)
			if !ok {
				continue
			}
			for i := range l {
				nv, err := elem(l[i], fd, fmt.Sprintf("%s[%d]", p, i), depth)
				if err != nil {
					return err
				}
				l[i] = nv
			}
		case fd.IsMap():
			mp, ok := v.(map[string]any)
			if !ok {
				continue
			}
			for mk, mv := range mp {
				nv, err := elem(mv, fd.MapValue(), p+"."+mk, depth)
				if err != nil {
					return err
				}
				mp[mk] = nv
			}
		default:
			nv, err := elem(v, fd, p, depth)
			if err != nil {
				return err
			}
			o[k] = nv
		}
	}
	return nil
}

func elem(v any, fd protoreflect.FieldDescriptor, path string, depth int) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return v, enumWordsToNames(v, fd.Message(), path, depth+1)
	case protoreflect.EnumKind:
		s, ok := v.(string)
		if !ok {
			return v, nil // a number, null or a wrong type: protojson decides
		}
		ed := fd.Enum()
		if ed.Values().ByName(protoreflect.Name(s)) != nil {
			return s, nil // protojson's own form
		}
		for i := range ed.Values().Len() {
			ev := ed.Values().Get(i)
			if EnumWord(ed, ev.Number()) == s {
				return string(ev.Name()), nil
			}
		}
		return nil, fmt.Errorf("json: %s: %q is not a value of %s", path, s, ed.Name())
	}
	return v, nil
}
