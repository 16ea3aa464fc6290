package rdmanl

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Netlink and RDMA netlink (uapi rdma/rdma_netlink.h) constants. They are
// spelled out here so that the parser builds on every OS.
const (
	nlmsgHdrLen = 16

	nlmsgNoop    = 1
	nlmsgError   = 2
	nlmsgDone    = 3
	nlmsgOverrun = 4

	nlmFRequest = 0x1
	nlmFDump    = 0x300 // NLM_F_ROOT | NLM_F_MATCH

	nlaFNested       = 0x8000
	nlaFNetByteorder = 0x4000
	nlaTypeMask      = ^uint16(nlaFNested | nlaFNetByteorder)

	rdmaNLNLDEV = 5 // RDMA_NL_NLDEV client

	cmdGet      = 1  // RDMA_NLDEV_CMD_GET
	cmdResQPGet = 10 // RDMA_NLDEV_CMD_RES_QP_GET

	attrDevIndex  = 1  // u32
	attrDevName   = 2  // string
	attrPortIndex = 3  // u32
	attrResQP     = 19 // nested table
	attrResQPEnt  = 20 // nested entry
	attrResLQPN   = 21 // u32
	attrResType   = 26 // u8
	attrResState  = 27 // u8
	attrResPID    = 28 // u32
	attrResKern   = 29 // string

	// MaxQPs is the most QPs ParseQPDump counts.
	MaxQPs = 1 << 20
)

// msgType is RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func msgType(op uint16) uint16 { return rdmaNLNLDEV<<10 | op }

// maxQPs is MaxQPs; tests lower it.
var maxQPs = MaxQPs

// TypeResQPGet is the nlmsg_type of a RES_QP_GET request and its replies (5130).
var TypeResQPGet = msgType(cmdResQPGet)

var qpTypeNames = [...]string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"}

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// QPTypeName names a RDMA_NLDEV_ATTR_RES_TYPE value as `rdma resource show
// qp` does ("RC", "UD", ... 0xFF "DRIVER"); other values are "TYPE_<n>".
func QPTypeName(t uint8) string {
	if int(t) < len(qpTypeNames) {
		return qpTypeNames[t]
	}
	if t == 0xFF {
		return "DRIVER"
	}
	return fmt.Sprintf("TYPE_%d", t)
}

// QPStateName names a RDMA_NLDEV_ATTR_RES_STATE value ("RTS", ...); other
// values are "STATE_<n>".
func QPStateName(s uint8) string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("STATE_%d", s)
}

// NetlinkError is an NLMSG_ERROR reply.
type NetlinkError struct {
	Errno syscall.Errno
}

func (e *NetlinkError) Error() string { return fmt.Sprintf("rdma netlink: %v", e.Errno) }

func (e *NetlinkError) Unwrap() error { return e.Errno }

// WireError is a malformed message: Msg is the index in the input, Offset
// the byte offset in it.
type WireError struct {
	Msg, Offset int
	Reason      string
}

func (e *WireError) Error() string {
	return fmt.Sprintf("rdma netlink: message %d offset %d: %s", e.Msg, e.Offset, e.Reason)
}

type nlMsg struct {
	typ, flags uint16
	seq, pid   uint32
	payload    []byte
	off        int // payload offset in the buffer
}

// splitMessages cuts one receive buffer into netlink messages.
func splitMessages(idx int, b []byte) ([]nlMsg, error) {
	var out []nlMsg
	off := 0
	for off < len(b) {
		if len(b)-off < nlmsgHdrLen {
			return nil, &WireError{idx, off, fmt.Sprintf("truncated netlink header (%d bytes)", len(b)-off)}
		}
		l := int(binary.LittleEndian.Uint32(b[off:]))
		if l < nlmsgHdrLen || l > len(b)-off {
			return nil, &WireError{idx, off, fmt.Sprintf("nlmsg_len %d does not fit the %d bytes left", l, len(b)-off)}
		}
		out = append(out, nlMsg{
			typ:     binary.LittleEndian.Uint16(b[off+4:]),
			flags:   binary.LittleEndian.Uint16(b[off+6:]),
			seq:     binary.LittleEndian.Uint32(b[off+8:]),
			pid:     binary.LittleEndian.Uint32(b[off+12:]),
			payload: b[off+nlmsgHdrLen : off+l],
			off:     off + nlmsgHdrLen,
		})
		off += align4(l)
	}
	return out, nil
}

func align4(n int) int { return (n + 3) &^ 3 }

type nlAttr struct {
	typ  uint16 // without the NESTED/NET_BYTEORDER flags
	data []byte
	off  int // offset of data in the message buffer
}

// parseAttrs walks a run of netlink attributes; base is b's offset in the
// message for error reports.
func parseAttrs(idx, base int, b []byte) ([]nlAttr, error) {
	var out []nlAttr
	off := 0
	for off < len(b) {
		if len(b)-off < 4 {
			return nil, &WireError{idx, base + off, fmt.Sprintf("truncated attribute header (%d bytes)", len(b)-off)}
		}
		l := int(binary.LittleEndian.Uint16(b[off:]))
		t := binary.LittleEndian.Uint16(b[off+2:])
		if l < 4 || l > len(b)-off {
			return nil, &WireError{idx, base + off, fmt.Sprintf("attribute %d length %d does not fit the %d bytes left", t&nlaTypeMask, l, len(b)-off)}
		}
		out = append(out, nlAttr{typ: t & nlaTypeMask, data: b[off+4 : off+l], off: base + off + 4})
		off += align4(l)
	}
	return out, nil
}

func attrU32(idx int, a nlAttr) (uint32, error) {
	if len(a.data) != 4 {
		return 0, &WireError{idx, a.off - 4, fmt.Sprintf("attribute %d: %d bytes, want a u32", a.typ, len(a.data))}
	}
	return binary.LittleEndian.Uint32(a.data), nil
}

func attrU8(idx int, a nlAttr) (uint8, error) {
	if len(a.data) != 1 {
		return 0, &WireError{idx, a.off - 4, fmt.Sprintf("attribute %d: %d bytes, want a u8", a.typ, len(a.data))}
	}
	return a.data[0], nil
}

func attrString(a nlAttr) string {
	d := a.data
	for i, c := range d {
		if c == 0 {
			d = d[:i]
			break
		}
	}
	return string(d)
}

type qpKey struct {
	dev        string
	port       uint32
	typ, state string
}

// ParseQPDump counts the QPs of a RDMA_NLDEV_CMD_RES_QP_GET dump by device,
// port, type and state, as `rdma resource show qp` would list them. msgs are
// receive buffers, each holding one or more whole netlink messages (header
// and attributes). NLMSG_DONE ends one device's dump; several dumps may
// follow each other. An NLMSG_ERROR with a non-zero errno gives a
// *NetlinkError; a malformed message a *WireError naming the message and
// offset, and so does a dump that ends without its NLMSG_DONE. At most
// MaxQPs QPs are counted. QPs with no port yet are counted under port 0.
// The result is sorted by device, port, type and state.
func ParseQPDump(msgs [][]byte) ([]*ginv1.QpSummary, error) {
	counts := make(map[qpKey]uint32)
	total := 0
	open := -1 // index of a QP message whose dump has not ended yet
	for idx, buf := range msgs {
		ms, err := splitMessages(idx, buf)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			switch m.typ {
			case nlmsgNoop:
				continue
			case nlmsgDone:
				if err := doneError(m); err != nil {
					return nil, err
				}
				open = -1
				continue
			case nlmsgError:
				if err := errorMessage(idx, m); err != nil {
					return nil, err
				}
				continue
			case nlmsgOverrun:
				return nil, &WireError{idx, m.off - nlmsgHdrLen, "NLMSG_OVERRUN"}
			case TypeResQPGet:
			default:
				return nil, &WireError{idx, m.off - nlmsgHdrLen, fmt.Sprintf("unexpected message type %d", m.typ)}
			}
			n, err := countQPMessage(idx, m, counts, maxQPs-total)
			if err != nil {
				return nil, err
			}
			total += n
			open = idx
		}
	}
	if open >= 0 {
		return nil, &WireError{len(msgs) - 1, len(msgs[len(msgs)-1]), fmt.Sprintf("dump (from message %d) ends without NLMSG_DONE (truncated?)", open)}
	}
	out := make([]*ginv1.QpSummary, 0, len(counts))
	for k, n := range counts {
		out = append(out, &ginv1.QpSummary{Device: k.dev, Port: k.port, Type: k.typ, State: k.state, Count: n})
	}
	slices.SortFunc(out, func(a, b *ginv1.QpSummary) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Type, b.Type), cmp.Compare(a.State, b.State))
	})
	return out, nil
}

// doneError reads the optional errno of NLMSG_DONE (a dump that failed
// part-way puts a negative errno there).
func doneError(m nlMsg) error {
	if len(m.payload) >= 4 {
		if e := int32(binary.LittleEndian.Uint32(m.payload)); e < 0 {
			return &NetlinkError{Errno: syscall.Errno(-e)}
		}
	}
	return nil
}

// errorMessage reads NLMSG_ERROR: errno 0 is an ACK.
func errorMessage(idx int, m nlMsg) error {
	if len(m.payload) < 4 {
		return &WireError{idx, m.off, "truncated NLMSG_ERROR"}
	}
	e := int32(binary.LittleEndian.Uint32(m.payload))
	if e == 0 {
		return nil
	}
	if e > 0 {
		return &NetlinkError{Errno: syscall.Errno(e)}
	}
	return &NetlinkError{Errno: syscall.Errno(-e)}
}

// countQPMessage adds one RES_QP_GET reply's QPs to counts; at most budget.
func countQPMessage(idx int, m nlMsg, counts map[qpKey]uint32, budget int) (int, error) {
	attrs, err := parseAttrs(idx, m.off, m.payload)
	if err != nil {
		return 0, err
	}
	var (
		dev      string
		devIndex uint32
		hasIndex bool
		port     uint32
		tables   []nlAttr
	)
	for _, a := range attrs {
		switch a.typ {
		case attrDevIndex:
			if devIndex, err = attrU32(idx, a); err != nil {
				return 0, err
			}
			hasIndex = true
		case attrDevName:
			dev = attrString(a)
		case attrPortIndex:
			if port, err = attrU32(idx, a); err != nil {
				return 0, err
			}
		case attrResQP:
			tables = append(tables, a)
		}
	}
	if dev == "" {
		if !hasIndex {
			if len(tables) == 0 {
				return 0, nil // nothing to count and nothing to name
			}
			return 0, &WireError{idx, m.off, "QP message without device name or index"}
		}
		dev = fmt.Sprintf("dev%d", devIndex)
	}
	n := 0
	for _, tbl := range tables {
		entries, err := parseAttrs(idx, tbl.off, tbl.data)
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			if e.typ != attrResQPEnt {
				continue
			}
			key, err := qpEntry(idx, e, dev, port)
			if err != nil {
				return 0, err
			}
			if n >= budget {
				return 0, &WireError{idx, e.off - 4, fmt.Sprintf("more than %d QPs", maxQPs)}
			}
			n++
			counts[key]++
		}
	}
	return n, nil
}

func qpEntry(idx int, e nlAttr, dev string, port uint32) (qpKey, error) {
	fields, err := parseAttrs(idx, e.off, e.data)
	if err != nil {
		return qpKey{}, err
	}
	k := qpKey{dev: dev, port: port}
	var hasType, hasState bool
	for _, f := range fields {
		switch f.typ {
		case attrPortIndex:
			if k.port, err = attrU32(idx, f); err != nil {
				return qpKey{}, err
			}
		case attrResType:
			t, err := attrU8(idx, f)
			if err != nil {
				return qpKey{}, err
			}
			k.typ, hasType = QPTypeName(t), true
		case attrResState:
			s, err := attrU8(idx, f)
			if err != nil {
				return qpKey{}, err
			}
			k.state, hasState = QPStateName(s), true
		case attrResLQPN, attrResPID:
			if _, err := attrU32(idx, f); err != nil {
				return qpKey{}, err
			}
		}
	}
	if !hasType || !hasState {
		return qpKey{}, &WireError{idx, e.off - 4, "QP entry without type or state"}
	}
	return k, nil
}

// appendMsg appends a netlink message with the given header fields and
// payload (attributes), padded to 4 bytes.
func appendMsg(b []byte, typ, flags uint16, seq, pid uint32, payload []byte) []byte {
	l := nlmsgHdrLen + len(payload)
	b = binary.LittleEndian.AppendUint32(b, uint32(l))
	b = binary.LittleEndian.AppendUint16(b, typ)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint32(b, seq)
	b = binary.LittleEndian.AppendUint32(b, pid)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendAttr appends a netlink attribute, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.LittleEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	return appendAttr(b, typ, binary.LittleEndian.AppendUint32(nil, v))
}

// rdmaDevice is one entry of a CMD_GET dump.
type rdmaDevice struct {
	index uint32
	name  string
}

// parseDevices reads a RDMA_NLDEV_CMD_GET dump; done reports whether
// NLMSG_DONE was seen.
func parseDevices(idx int, buf []byte, seq uint32) (devs []rdmaDevice, done bool, err error) {
	ms, err := splitMessages(idx, buf)
	if err != nil {
		return nil, false, err
	}
	for _, m := range ms {
		if m.seq != seq {
			continue // a stale reply
		}
		switch m.typ {
		case nlmsgDone:
			return devs, true, doneError(m)
		case nlmsgError:
			if err := errorMessage(idx, m); err != nil {
				return nil, false, err
			}
			continue
		case msgType(cmdGet):
		default:
			continue
		}
		attrs, err := parseAttrs(idx, m.off, m.payload)
		if err != nil {
			return nil, false, err
		}
		var d rdmaDevice
		var ok bool
		for _, a := range attrs {
			switch a.typ {
			case attrDevIndex:
				if d.index, err = attrU32(idx, a); err != nil {
					return nil, false, err
				}
				ok = true
			case attrDevName:
				d.name = attrString(a)
			}
		}
		if !ok {
			return nil, false, &WireError{idx, m.off, "device without index"}
		}
		devs = append(devs, d)
	}
	return devs, false, nil
}

// ErrNoRDMA says the kernel has no RDMA netlink (no RDMA stack loaded, or a
// sandbox without it).
var ErrNoRDMA = errors.New("rdma netlink: not supported here (no RDMA stack)")
