package master

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// onFreshStack runs f on a short-lived goroutine and waits for it. A
// session's own goroutine lives as long as the session, blocked in
// grpc-go's Recv, and a goroutine's stack keeps the size of the deepest
// call it ever made: the runtime halves it at a collection only while less
// than a quarter is in use, and blocked in Recv a session uses ~5 KiB. The
// handshake, validation, Raft and answers run here instead, so an idle
// session holds 8 KiB of stack, not 16 (issue #16, docs/BENCHMARKS.md).
func onFreshStack(f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return <-done
}

// freshStackDecodeBytes is the size from which a request is decoded on a
// short-lived goroutine: an inventory nests messages several levels deep,
// a heartbeat (~30 bytes) does not.
const freshStackDecodeBytes = 256

// freshStackCodec is grpc-go's proto codec, except that a request of
// freshStackDecodeBytes or more is decoded on a short-lived goroutine
// (onFreshStack): grpc-go decodes on the stream's goroutine, inside Recv,
// and an inventory's decoding, deeper than what an idle session needs,
// would leave that goroutine's stack at 16 KiB for the session's life.
// Every request of this master's gRPC server goes through it (the server
// uses proto for every content subtype it is sent, as grpc-go's default
// does: proto is the only codec registered).
type freshStackCodec struct{ encoding.CodecV2 }

func newFreshStackCodec() freshStackCodec {
	return freshStackCodec{encoding.GetCodecV2(proto.Name)}
}

// Unmarshal decodes data into v.
func (c freshStackCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if data.Len() < freshStackDecodeBytes {
		return c.CodecV2.Unmarshal(data, v)
	}
	return onFreshStack(func() error { return c.CodecV2.Unmarshal(data, v) })
}
