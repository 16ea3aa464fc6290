package jsonout

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Write writes v as indented JSON (two spaces) followed by a newline.
func Write(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("json: indent: %w", err)
	}
	out.WriteByte('\n')
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("json: write: %w", err)
	}
	return nil
}

// WriteLine writes v as one line of compact JSON (JSON Lines, for streams).
func WriteLine(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("json: write: %w", err)
	}
	return nil
}

// Marshal returns v as compact JSON following the package's convention. v
// is a proto.Message, a Go value (struct, slice, map, scalar) possibly
// holding messages, or nil.
func Marshal(v any) ([]byte, error) {
	var e encoder
	if err := e.value(reflect.ValueOf(v), ""); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// EnumWord is the word an enum value is written as: its name without the
// enum's common prefix, in lowercase ("up" for NODE_STATE_UP). A number the
// descriptor does not know (sent by a newer server) is "unknown_<n>".
func EnumWord(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	v := ed.Values().ByNumber(n)
	if v == nil {
		return "unknown_" + strconv.Itoa(int(n))
	}
	return strings.ToLower(strings.TrimPrefix(string(v.Name()), enumPrefix(ed)))
}

// enumPrefix is the longest prefix ending in "_" common to all value
// names of the enum ("NODE_STATE_"); "" for an enum of one value.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	vals := ed.Values()
	if vals.Len() < 2 {
		return ""
	}
	p := string(vals.Get(0).Name())
	for i := 1; i < vals.Len(); i++ {
		n := string(vals.Get(i).Name())
		j := 0
		for j < len(p) && j < len(n) && p[j] == n[j] {
			j++
		}
		p = p[:j]
	}
	if i := strings.LastIndexByte(p, '_'); i >= 0 {
		return p[:i+1]
	}
	return ""
}

var (
	protoMessageType = reflect.TypeFor[proto.Message]()
	timeType         = reflect.TypeFor[time.Time]()
	durationType     = reflect.TypeFor[time.Duration]()
)

type encoder struct{ buf bytes.Buffer }

// value writes a Go value; path names it in errors ("nodes[3].time_us").
func (e *encoder) value(v reflect.Value, path string) error {
	if !v.IsValid() {
		e.buf.WriteString("null")
		return nil
	}
	if v.Type().Implements(protoMessageType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			e.buf.WriteString("null")
			return nil
		}
		return e.message(v.Interface().(proto.Message).ProtoReflect(), path)
	}
	switch v.Type() {
	case timeType:
		e.str(v.Interface().(time.Time).UTC().Format(time.RFC3339Nano))
		return nil
	case durationType:
		e.str(formatSeconds(v.Interface().(time.Duration)))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf.WriteString("null")
			return nil
		}
		return e.value(v.Elem(), path)
	case reflect.Struct:
		return e.goStruct(v, path)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			e.str(base64.StdEncoding.EncodeToString(v.Bytes()))
			return nil
		}
		e.buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			if err := e.value(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		e.buf.WriteByte(']')
		return nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("json: %s: map keys must be strings, not %s", orRoot(path), v.Type().Key())
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		e.buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			e.str(k.String())
			e.buf.WriteByte(':')
			if err := e.value(v.MapIndex(k), path+"."+k.String()); err != nil {
				return err
			}
		}
		e.buf.WriteByte('}')
		return nil
	case reflect.String:
		e.str(v.String())
	case reflect.Bool:
		e.buf.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.buf.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), v.Type().Bits(), path)
	default:
		return fmt.Errorf("json: %s: cannot encode a %s", orRoot(path), v.Type())
	}
	return nil
}

// goStruct writes the exported fields with a json tag, in declaration order.
func (e *encoder) goStruct(v reflect.Value, path string) error {
	t := v.Type()
	e.buf.WriteByte('{')
	first := true
	for i := range t.NumField() {
		name, ok := fieldName(t.Field(i))
		if !ok {
			continue
		}
		if !first {
			e.buf.WriteByte(',')
		}
		first = false
		e.str(name)
		e.buf.WriteByte(':')
		if err := e.value(v.Field(i), join(path, name)); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// fieldName is a struct field's JSON name: the name of its json tag; fields
// without one (or tagged "-") and unexported fields are not written.
func fieldName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" || name == "-" {
		return "", false
	}
	return name, true
}

func (e *encoder) message(m protoreflect.Message, path string) error {
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		s, n := m.Get(md.Fields().ByName("seconds")).Int(), m.Get(md.Fields().ByName("nanos")).Int()
		e.str(time.Unix(s, n).UTC().Format(time.RFC3339Nano))
		return nil
	case "google.protobuf.Duration":
		s, n := m.Get(md.Fields().ByName("seconds")).Int(), m.Get(md.Fields().ByName("nanos")).Int()
		e.str(formatSeconds(time.Duration(s)*time.Second + time.Duration(n)))
		return nil
	}
	e.buf.WriteByte('{')
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if i > 0 {
			e.buf.WriteByte(',')
		}
		name := string(fd.Name())
		e.str(name)
		e.buf.WriteByte(':')
		if err := e.field(m, fd, join(path, name)); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

func (e *encoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, path string) error {
	switch {
	case fd.IsList():
		l := m.Get(fd).List()
		e.buf.WriteByte('[')
		for i := range l.Len() {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			if err := e.scalar(fd, l.Get(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		e.buf.WriteByte(']')
		return nil
	case fd.IsMap():
		mp := m.Get(fd).Map()
		type kv struct {
			k string
			v protoreflect.Value
		}
		var kvs []kv
		mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			kvs = append(kvs, kv{k.String(), v})
			return true
		})
		sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
		e.buf.WriteByte('{')
		for i, p := range kvs {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			e.str(p.k)
			e.buf.WriteByte(':')
			if err := e.scalar(fd.MapValue(), p.v, path+"."+p.k); err != nil {
				return err
			}
		}
		e.buf.WriteByte('}')
		return nil
	case (fd.Message() != nil || fd.HasOptionalKeyword()) && !m.Has(fd):
		// An unset message, or an unset proto3 optional scalar (the
		// answer does not know it), is null rather than a zero that
		// would read as a value.
		e.buf.WriteString("null")
		return nil
	}
	return e.scalar(fd, m.Get(fd), path)
}

// scalar writes one value of a field (an element, for lists and maps).
func (e *encoder) scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return e.message(v.Message(), path)
	case protoreflect.EnumKind:
		e.str(EnumWord(fd.Enum(), v.Enum()))
	case protoreflect.StringKind:
		e.str(v.String())
	case protoreflect.BytesKind:
		e.str(base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.BoolKind:
		e.buf.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		e.buf.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		e.buf.WriteString(strconv.FormatUint(v.Uint(), 10))
	case protoreflect.FloatKind:
		return e.float(v.Float(), 32, path)
	case protoreflect.DoubleKind:
		return e.float(v.Float(), 64, path)
	default:
		return fmt.Errorf("json: %s: unsupported field kind %s", orRoot(path), fd.Kind())
	}
	return nil
}

func (e *encoder) float(f float64, bits int, path string) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("json: %s is %v, which JSON cannot carry", orRoot(path), f)
	}
	e.buf.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
	return nil
}

// str writes a JSON string; <, > and & stay as they are ("a -> b").
func (e *encoder) str(s string) {
	enc := json.NewEncoder(&e.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	e.buf.Truncate(e.buf.Len() - 1)
}

// formatSeconds is a duration as protobuf JSON writes it: "1.5s", "0s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "the value"
	}
	return path
}
