package master

import (
	"context"
	"fmt"
	"strconv"

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
func checkRequestText(m proto.Message) error {
	if m == nil {
		return nil
	}
	return checkMessageText(m.ProtoReflect(), "")
}

func checkMessageText(m protoreflect.Message, prefix string) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				elem := path + "[" + strconv.Quote(k.String()) + "]"
				if fd.MapKey().Kind() == protoreflect.StringKind {
					if cerr := inventory.CheckText(k.String()); cerr != nil {
						err = invalidf(path, "a key: %v", cerr)
						return false
					}
				}
				err = checkValueText(fd.MapValue(), mv, elem)
				return err == nil
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkValueText(fd, l.Get(i), fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			err = checkValueText(fd, v, path)
		}
		return err == nil
	})
	return err
}

func checkValueText(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if err := inventory.CheckText(v.String()); err != nil {
			return invalidf(path, "%v", err)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return checkMessageText(v.Message(), path+".")
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
