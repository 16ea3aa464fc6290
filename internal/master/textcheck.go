package master

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gin-topology/gin/internal/inventory"
)

// Control characters at the edge: every string of every request, at any
// depth (job ids, node lists, GPU ids, calibration fields, Join addresses,
// fabric descriptions, hello fields...), is checked with
// inventory.CheckText before any handler sees it; one that holds a control
// character, invalid UTF-8 or a bidi override is refused with
// INVALID_ARGUMENT naming the field, and nothing changes. Inventories are
// checked again by inventory.Validate (with their size limits); this is
// the one place that covers the rest, so a new field is covered when it
// is added.

// checkRequestText returns a *badRequest naming the first string field of
// m, by its path (e.g. "fabric.switches[3].description"), that CheckText
// refuses, or nil. Bytes fields are not text and are not checked.
//
// The walk keeps the path as a stack of steps and spells it only for the
// field it refuses: an inventory has thousands of fields, and building
// every one's path was the largest cost of a registration (issue #16).
func checkRequestText(m proto.Message) error {
	if m == nil {
		return nil
	}
	var w textWalk
	return w.message(m.ProtoReflect())
}

// textWalk is one request's walk; path is the field being checked.
type textWalk struct{ path []textStep }

// textStep is one step of a path: a field, and in a list its index or in
// a map its key.
type textStep struct {
	name  protoreflect.Name
	index int    // a list element's, or -1
	key   string // a map entry's (quoted when spelled)
	isKey bool
}

// spell is the path as a refusal names it.
func (w *textWalk) spell() string {
	var b strings.Builder
	for i, st := range w.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(string(st.name))
		switch {
		case st.isKey:
			b.WriteString("[" + strconv.Quote(st.key) + "]")
		case st.index >= 0:
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
		}
	}
	return b.String()
}

func (w *textWalk) message(m protoreflect.Message) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		w.path = append(w.path, textStep{name: fd.Name(), index: -1})
		top := len(w.path) - 1
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapKey().Kind() == protoreflect.StringKind {
					if cerr := inventory.CheckText(k.String()); cerr != nil {
						w.path[top].isKey = false // a refused key names its field
						err = invalidf(w.spell(), "a key: %v", cerr)
						return false
					}
				}
				w.path[top].key, w.path[top].isKey = k.String(), true
				err = w.value(fd.MapValue(), mv)
				return err == nil
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				w.path[top].index = i
				err = w.value(fd, l.Get(i))
			}
		default:
			err = w.value(fd, v)
		}
		if err == nil {
			w.path = w.path[:top]
		}
		return err == nil
	})
	return err
}

func (w *textWalk) value(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if err := inventory.CheckText(v.String()); err != nil {
			return invalidf(w.spell(), "%v", err)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return w.message(v.Message())
	}
	return nil
}

// textUnary refuses a unary request with a control character in any string.
func textUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if m, ok := req.(proto.Message); ok {
		if err := checkRequestText(m); err != nil {
			return nil, toStatus(err)
		}
	}
	return h(ctx, req)
}

// textStream checks every message a stream receives (agent sessions,
// watches) the same way.
func textStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &textCheckedStream{ServerStream: ss})
}

type textCheckedStream struct{ grpc.ServerStream }

func (s *textCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if pm, ok := m.(proto.Message); ok {
		// The walk recurses through every nested message (an inventory's
		// are deep): on the stream's own goroutine, which lives as long
		// as the stream, it would leave a larger stack behind
		// (onFreshStack).
		if err := onFreshStack(func() error { return checkRequestText(pm) }); err != nil {
			return toStatus(err)
		}
	}
	return nil
}
