package rdmanl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// The test encoder builds the wire bytes the kernel sends (nldev.c
// res_get_common_dumpit / fill_res_qp_entry): a 16-byte little-endian
// nlmsghdr, then DEV_INDEX, DEV_NAME and a RES_QP table of RES_QP_ENTRY
// nests, every attribute padded to 4 bytes. It is written apart from the
// package's own appendMsg/appendAttr so that a bug is not shared.

type attr struct {
	typ    uint16
	data   []byte
	nested []attr
	flag   bool // set NLA_F_NESTED on a nest
}

func u32(t uint16, v uint32) attr { return attr{typ: t, data: le32(v)} }
func u8(t uint16, v uint8) attr   { return attr{typ: t, data: []byte{v}} }
func str(t uint16, s string) attr { return attr{typ: t, data: append([]byte(s), 0)} }
func nest(t uint16, flag bool, as ...attr) attr {
	return attr{typ: t, nested: as, flag: flag}
}

func le32(v uint32) []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return b[:]
}

func (a attr) encode() []byte {
	body := a.data
	typ := a.typ
	if a.nested != nil {
		body = nil
		for _, n := range a.nested {
			body = append(body, n.encode()...)
		}
		if a.flag {
			typ |= 0x8000
		}
	}
	out := make([]byte, 4, 4+len(body)+3)
	binary.LittleEndian.PutUint16(out[0:], uint16(4+len(body)))
	binary.LittleEndian.PutUint16(out[2:], typ)
	out = append(out, body...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

func message(typ, flags uint16, seq uint32, payload []byte) []byte {
	out := make([]byte, 16, 16+len(payload))
	binary.LittleEndian.PutUint32(out[0:], uint32(16+len(payload)))
	binary.LittleEndian.PutUint16(out[4:], typ)
	binary.LittleEndian.PutUint16(out[6:], flags)
	binary.LittleEndian.PutUint32(out[8:], seq)
	binary.LittleEndian.PutUint32(out[12:], 0) // from the kernel
	return append(out, payload...)
}

const nlmFMulti = 0x2

func qpMessage(seq, devIndex uint32, dev string, flag bool, entries ...attr) []byte {
	var p []byte
	p = append(p, u32(attrDevIndex, devIndex).encode()...)
	p = append(p, str(attrDevName, dev).encode()...)
	p = append(p, nest(attrResQP, flag, entries...).encode()...)
	return message(5130, nlmFMulti, seq, p)
}

func negErrno(e syscall.Errno) []byte { v := -int32(e); return le32(uint32(v)) }

func done(seq uint32) []byte { return message(3, nlmFMulti, seq, le32(0)) }

func errMsg(seq uint32, errno syscall.Errno) []byte {
	p := negErrno(errno)
	p = append(p, message(5130, nlmFRequest|nlmFDump, seq, nil)...) // the request echoed
	return message(2, 0, seq, p)
}

// userQP is an RC/UC QP of a process: port, lqpn, rqpn, psns, mig state,
// type, state, pdn, pid (the order fill_res_qp_entry puts them in).
func userQP(port, lqpn uint32, typ, state uint8, pid uint32, flag bool) attr {
	as := []attr{}
	if port != 0 {
		as = append(as, u32(attrPortIndex, port))
	}
	as = append(as, u32(attrResLQPN, lqpn), u32(22, lqpn+1000), u32(23, 77), u32(24, 88), u8(25, 0),
		u8(attrResType, typ), u8(attrResState, state), u32(60, 3), u32(attrResPID, pid))
	return nest(attrResQPEnt, flag, as...)
}

// kernQP is a kernel QP (GSI/SMI of ib_core): kern name instead of pid.
func kernQP(port, lqpn uint32, typ, state uint8, flag bool) attr {
	return nest(attrResQPEnt, flag, u32(attrPortIndex, port), u32(attrResLQPN, lqpn), u32(24, 0),
		u8(attrResType, typ), u8(attrResState, state), str(attrResKern, "ib_core"))
}

const (
	tSMI, tGSI, tRC, tUD = 0, 1, 2, 4
	sInit, sRTS, sErr    = 1, 3, 6
)

// recordedDump is two devices' dumps as the kernel would send them: mlx5_0
// (NLA_F_NESTED set, as the brief's encoder does) in two messages, then
// DONE; mlx5_1 (no nest flag, as nldev.c's nla_nest_start_noflag does) with
// its DONE in the same receive buffer.
func recordedDump() [][]byte {
	m0a := qpMessage(7, 0, "mlx5_0", true,
		kernQP(1, 0, tSMI, sRTS, true),
		kernQP(1, 1, tGSI, sRTS, true),
		userQP(1, 0x120, tRC, sRTS, 4242, true),
		userQP(1, 0x121, tRC, sRTS, 4242, true),
	)
	m0b := qpMessage(7, 0, "mlx5_0", true,
		userQP(1, 0x122, tRC, sRTS, 4242, true),
		userQP(1, 0x130, tUD, sRTS, 4242, true),
		userQP(0, 0x140, tRC, sInit, 4243, true), // no port yet
	)
	m1 := qpMessage(8, 1, "mlx5_1", false,
		kernQP(1, 1, tGSI, sRTS, false),
		userQP(1, 0x200, tRC, sRTS, 4242, false),
		userQP(1, 0x201, tRC, sRTS, 4242, false),
		userQP(1, 0x202, tRC, sErr, 4242, false),
		userQP(1, 0x203, 0xFF, sRTS, 4242, false),
	)
	return [][]byte{m0a, m0b, done(7), append(m1, done(8)...)}
}

func TestEncoderWireBytes(t *testing.T) {
	// A u8 attribute is 5 bytes long and padded to 8; a nest's length
	// covers its padded children; the header counts the whole message.
	got := message(5130, 2, 1, nest(attrResQP, true, u8(attrResType, 2)).encode())
	want := []byte{
		28, 0, 0, 0, 0x0a, 0x14, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, // nlmsghdr: len 28, type 5130, NLM_F_MULTI, seq 1
		12, 0, 19, 0x80, // RES_QP | NLA_F_NESTED, len 12
		5, 0, 26, 0, 2, 0, 0, 0, // RES_TYPE = RC, padded
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("wire bytes\n got % x\nwant % x", got, want)
	}
}

func TestParseQPDump(t *testing.T) {
	got, err := ParseQPDump(recordedDump())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mlx5_0/0 RC INIT 1",
		"mlx5_0/1 GSI RTS 1",
		"mlx5_0/1 RC RTS 3",
		"mlx5_0/1 SMI RTS 1",
		"mlx5_0/1 UD RTS 1",
		"mlx5_1/1 DRIVER RTS 1",
		"mlx5_1/1 GSI RTS 1",
		"mlx5_1/1 RC ERR 1",
		"mlx5_1/1 RC RTS 2",
	}
	if s := summaries(got); s != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", s, strings.Join(want, "\n"))
	}
}

func summaries(qs []*ginv1.QpSummary) string {
	var lines []string
	for _, q := range qs {
		lines = append(lines, fmt.Sprintf("%s/%d %s %s %d", q.Device, q.Port, q.Type, q.State, q.Count))
	}
	return strings.Join(lines, "\n")
}

func TestParseQPDumpCases(t *testing.T) {
	d := recordedDump()
	oneQP := qpMessage(1, 0, "mlx5_0", true, userQP(1, 5, tRC, sRTS, 1, true))
	for _, c := range []struct {
		name    string
		msgs    [][]byte
		want    string // summaries, or the error text
		errno   syscall.Errno
		wantErr bool
	}{
		{name: "empty", msgs: nil, want: ""},
		{name: "only done", msgs: [][]byte{done(1)}, want: ""},
		{name: "device without QPs", msgs: [][]byte{append(qpMessage(1, 0, "mlx5_0", true), done(1)...)}, want: ""},
		{name: "ack then dump", msgs: [][]byte{message(2, 0, 1, append(le32(0), make([]byte, 16)...)), oneQP, done(1)}, want: "mlx5_0/1 RC RTS 1"},
		{name: "noop ignored", msgs: [][]byte{message(1, 0, 1, nil), oneQP, done(1)}, want: "mlx5_0/1 RC RTS 1"},
		{name: "error EOPNOTSUPP", msgs: [][]byte{errMsg(1, syscall.EOPNOTSUPP)}, errno: syscall.EOPNOTSUPP, wantErr: true},
		{name: "error after QPs", msgs: [][]byte{oneQP, errMsg(1, syscall.EPERM)}, errno: syscall.EPERM, wantErr: true},
		{name: "done with errno", msgs: [][]byte{oneQP, message(3, 2, 1, negErrno(syscall.EINTR))}, errno: syscall.EINTR, wantErr: true},
		{name: "no done", msgs: d[:2], want: "ends without NLMSG_DONE", wantErr: true},
		{name: "unexpected type", msgs: [][]byte{message(0x10, 0, 1, nil)}, want: "unexpected message type 16", wantErr: true},
		{name: "overrun", msgs: [][]byte{message(4, 0, 1, nil)}, want: "NLMSG_OVERRUN", wantErr: true},
		{name: "short header", msgs: [][]byte{d[0][:10]}, want: "message 0 offset 0: truncated netlink header", wantErr: true},
		{name: "bad nlmsg_len", msgs: [][]byte{d[0][:len(d[0])-4]}, want: "message 0 offset 0: nlmsg_len", wantErr: true},
		{name: "type is u16", msgs: [][]byte{append(qpMessage(1, 0, "x", true, nest(attrResQPEnt, true, u32(attrResType, 2), u8(attrResState, 3))), done(1)...)}, want: "want a u8", wantErr: true},
		{name: "entry without state", msgs: [][]byte{append(qpMessage(1, 0, "x", true, nest(attrResQPEnt, true, u8(attrResType, 2))), done(1)...)}, want: "without type or state", wantErr: true},
		{name: "dev index only", msgs: [][]byte{append(message(5130, 2, 1, append(u32(attrDevIndex, 3).encode(), nest(attrResQP, true, userQP(2, 1, tUD, sRTS, 1, true)).encode()...)), done(1)...)}, want: "dev3/2 UD RTS 1"},
		{name: "no device", msgs: [][]byte{append(message(5130, 2, 1, nest(attrResQP, true, userQP(2, 1, tUD, sRTS, 1, true)).encode()), done(1)...)}, want: "without device name or index", wantErr: true},
		{name: "odd type and state", msgs: [][]byte{append(qpMessage(1, 0, "x", true, userQP(1, 1, 42, 9, 1, true)), done(1)...)}, want: "x/1 TYPE_42 STATE_9 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseQPDump(c.msgs)
			if !c.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if s := summaries(got); s != c.want {
					t.Errorf("got %q, want %q", s, c.want)
				}
				return
			}
			if err == nil || got != nil {
				t.Fatalf("got %v, %v; want an error", got, err)
			}
			if c.errno != 0 {
				var ne *NetlinkError
				if !errors.As(err, &ne) || ne.Errno != c.errno || !errors.Is(err, c.errno) {
					t.Errorf("err = %v, want errno %v", err, c.errno)
				}
			} else if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestParseQPDumpTruncated cuts the first message at every length: each
// cut must be an error, never a panic or a partial count.
func TestParseQPDumpTruncated(t *testing.T) {
	full := recordedDump()
	m := full[0]
	for n := 0; n < len(m); n++ {
		cut := append([]byte(nil), m[:n]...)
		if n >= 4 {
			// Keep nlmsg_len consistent with the cut, so the attribute
			// walker (not the header check) meets the truncation.
			binary.LittleEndian.PutUint32(cut, uint32(n))
		}
		got, err := ParseQPDump([][]byte{cut, done(7)})
		if n == 0 {
			if err != nil || len(got) != 0 {
				t.Errorf("empty buffer: %v %v", got, err)
			}
			continue
		}
		if err == nil {
			// A cut that falls between whole attributes of the top
			// level leaves a well-formed, shorter message; only cuts
			// inside an attribute must fail.
			if !atAttrBoundary(m, n) {
				t.Errorf("cut at %d: no error, got %v", n, summaries(got))
			}
			continue
		}
		var we *WireError
		if !errors.As(err, &we) {
			t.Errorf("cut at %d: %T %v", n, err, err)
		}
	}
}

// atAttrBoundary reports whether n ends a top-level attribute of message m.
func atAttrBoundary(m []byte, n int) bool {
	off := 16
	if n == off {
		return true
	}
	for off < len(m) {
		l := int(binary.LittleEndian.Uint16(m[off:]))
		off += (l + 3) &^ 3
		if off == n || off-((l+3)&^3)+l == n {
			return true
		}
	}
	return false
}

func TestParseQPDumpAttrOffset(t *testing.T) {
	// DEV_INDEX claims 40 bytes in a message with 8 left: the error names
	// message 0, offset 16 (the attribute header right after nlmsghdr).
	p := []byte{40, 0, 1, 0, 0, 0, 0, 0}
	_, err := ParseQPDump([][]byte{message(5130, 2, 1, p)})
	var we *WireError
	if !errors.As(err, &we) || we.Msg != 0 || we.Offset != 16 || !strings.Contains(err.Error(), "offset 16") {
		t.Fatalf("err = %v", err)
	}
	// The same inside the RES_QP nest: DEV_INDEX(8) + DEV_NAME("m\0", 8) +
	// RES_QP header(4) → the entry header is at 16+8+8+4 = 36.
	bad := append(u32(attrDevIndex, 0).encode(), str(attrDevName, "m").encode()...)
	bad = append(bad, 12, 0, 19, 0x80, 20, 0, 20, 0x80, 0, 0, 0, 0)
	_, err = ParseQPDump([][]byte{message(5130, 2, 1, bad), done(1)})
	if !errors.As(err, &we) || we.Offset != 36 {
		t.Fatalf("nested: err = %v", err)
	}
}

func TestParseQPDumpLimit(t *testing.T) {
	defer func(v int) { maxQPs = v }(maxQPs)
	maxQPs = 8
	_, err := ParseQPDump(recordedDump()) // 12 QPs
	if err == nil || !strings.Contains(err.Error(), "more than 8 QPs") {
		t.Fatalf("err = %v", err)
	}
	maxQPs = 12
	if _, err := ParseQPDump(recordedDump()); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

func TestQPNames(t *testing.T) {
	for v, want := range map[uint8]string{0: "SMI", 1: "GSI", 2: "RC", 3: "UC", 4: "UD", 5: "RAW_IPV6", 6: "RAW_ETHERTYPE", 7: "UNKNOWN", 8: "RAW_PACKET", 9: "XRC_INI", 10: "XRC_TGT", 11: "TYPE_11", 0xFF: "DRIVER"} {
		if got := QPTypeName(v); got != want {
			t.Errorf("QPTypeName(%d) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[uint8]string{0: "RESET", 1: "INIT", 2: "RTR", 3: "RTS", 4: "SQD", 5: "SQE", 6: "ERR", 7: "STATE_7"} {
		if got := QPStateName(v); got != want {
			t.Errorf("QPStateName(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestParseDevices(t *testing.T) {
	dev := func(seq, idx uint32, name string) []byte {
		return message(5121, nlmFMulti, seq, append(u32(attrDevIndex, idx).encode(), append(str(attrDevName, name).encode(), u32(attrPortIndex, 1).encode()...)...))
	}
	buf := append(append(dev(3, 0, "mlx5_0"), dev(3, 1, "mlx5_1")...), dev(2, 9, "stale")...)
	devs, fin, err := parseDevices(0, buf, 3)
	if err != nil || fin || len(devs) != 2 || devs[0] != (rdmaDevice{0, "mlx5_0"}) || devs[1] != (rdmaDevice{1, "mlx5_1"}) {
		t.Fatalf("got %v %v %v", devs, fin, err)
	}
	devs, fin, err = parseDevices(0, done(3), 3)
	if err != nil || !fin || len(devs) != 0 {
		t.Fatalf("done: %v %v %v", devs, fin, err)
	}
	if _, _, err = parseDevices(0, errMsg(3, syscall.EPERM), 3); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("error: %v", err)
	}
	if _, _, err = parseDevices(0, message(5121, 2, 3, str(attrDevName, "x").encode()), 3); err == nil {
		t.Fatal("device without index accepted")
	}
	// The package's own request encoder agrees with the test encoder.
	if got, want := appendMsg(nil, 5130, nlmFRequest|nlmFDump, 5, 0, appendAttrU32(nil, attrDevIndex, 2)), message(5130, nlmFRequest|nlmFDump, 5, u32(attrDevIndex, 2).encode()); !bytes.Equal(got, want) {
		t.Fatalf("request\n got % x\nwant % x", got, want)
	}
}

func FuzzParseQPDump(f *testing.F) {
	d := recordedDump()
	f.Add(d[0], d[2])
	f.Add(d[3], []byte(nil))
	f.Add(errMsg(1, syscall.EPERM), []byte(nil))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got, err := ParseQPDump([][]byte{a, b})
		if err != nil {
			if got != nil {
				t.Fatal("result with error")
			}
			return
		}
		for _, q := range got {
			if q.Count == 0 || q.Device == "" || q.Type == "" || q.State == "" {
				t.Fatalf("summary %v", q)
			}
		}
	})
}
