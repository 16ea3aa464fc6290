package plansock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gin-topology/gin/internal/planread"
)

// Wire bounds.
const (
	MaxJobID   = 128
	MaxNodes   = 8192
	MaxHash    = 128
	MaxMessage = 1024
	version    = 1
)

var (
	reqMagic  = [4]byte{'G', 'I', 'N', 'Q'}
	respMagic = [4]byte{'G', 'I', 'N', 'A'}
)

// Status is the outcome of a request.
type Status uint8

// Statuses.
const (
	StatusOK          Status = 0
	StatusNotFound    Status = 1
	StatusUnavailable Status = 2
	StatusBadRequest  Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "OK"
	case StatusNotFound:
		return "NOT_FOUND"
	case StatusUnavailable:
		return "UNAVAILABLE"
	case StatusBadRequest:
		return "BAD_REQUEST"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Form is what a client wants the plan as: the version byte of its request.
type Form uint8

// Forms.
const (
	// FormPlan: the encoded gin.v1.Plan (decode and verify it with planread).
	FormPlan Form = 1
	// FormTable: the compiled decision table in internal/plantable's C form
	// (what the plugin's C shim reads without Go).
	FormTable Form = 2
)

// Request asks for a job's plan. Nodes and GPUsPerNode let the agent have
// the plan created when none is pinned yet (as GetOrCreatePlan does).
type Request struct {
	JobID       string
	Nodes       string
	GPUsPerNode uint32
	Form        Form // 0 means FormPlan
	// UID is the asking process's user (SO_PEERCRED), set by the Server
	// and never sent: a Source keeps what one user's requests cause (a
	// cached miss, a bound on distinct jobs) to that user. 0 is root.
	UID uint32
}

// Validate refuses a request the agent must not act on.
func (r Request) Validate() error {
	switch {
	case r.JobID == "":
		return errors.New("empty job id")
	case len(r.JobID) > MaxJobID:
		return fmt.Errorf("job id of %d bytes, more than %d", len(r.JobID), MaxJobID)
	case len(r.Nodes) > MaxNodes:
		return fmt.Errorf("node list of %d bytes, more than %d", len(r.Nodes), MaxNodes)
	case r.Form > FormTable:
		return fmt.Errorf("unknown form %d", r.Form)
	case strings.ContainsFunc(r.JobID, isControl) || strings.ContainsFunc(r.Nodes, isControl):
		return errors.New("control characters in the job id or node list")
	}
	return nil
}

// Response is the agent's answer.
type Response struct {
	Status Status
	Hash   string // the plan's content hash (OK only)
	Body   []byte // the encoded plan (OK) or a message
}

// AppendRequest encodes r after b.
func AppendRequest(b []byte, r Request) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	f := r.Form
	if f == 0 {
		f = FormPlan
	}
	b = append(b, reqMagic[:]...)
	b = append(b, byte(f))
	b = appendString16(b, r.JobID)
	b = appendString16(b, r.Nodes)
	return binary.BigEndian.AppendUint32(b, r.GPUsPerNode), nil
}

// ReadRequest decodes one request from rd, bounded by the wire limits.
func ReadRequest(rd io.Reader) (Request, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(rd, hdr[:]); err != nil {
		return Request{}, fmt.Errorf("request header: %w", err)
	}
	if [4]byte(hdr[:4]) != reqMagic || (Form(hdr[4]) != FormPlan && Form(hdr[4]) != FormTable) {
		return Request{}, fmt.Errorf("not a GIN plan request (header %q)", hdr[:])
	}
	r := Request{Form: Form(hdr[4])}
	var err error
	if r.JobID, err = readString16(rd, MaxJobID, "job id"); err != nil {
		return Request{}, err
	}
	if r.Nodes, err = readString16(rd, MaxNodes, "node list"); err != nil {
		return Request{}, err
	}
	var g [4]byte
	if _, err := io.ReadFull(rd, g[:]); err != nil {
		return Request{}, fmt.Errorf("request GPUs per node: %w", err)
	}
	r.GPUsPerNode = binary.BigEndian.Uint32(g[:])
	return r, r.Validate()
}

// MaxRequest is the longest request on the wire.
const MaxRequest = 4 + 1 + 2 + MaxJobID + 2 + MaxNodes + 4

// errShort says that b holds the start of a request but not all of it.
var errShort = errors.New("request incomplete")

// rawRequest is a request parsed in place: JobID and Nodes alias the bytes
// it was parsed from.
type rawRequest struct {
	form        Form
	jobID       []byte
	nodes       []byte
	gpusPerNode uint32
}

// parseRequest parses the request at the start of b without allocating.
// It returns errShort while b is a prefix of a request that may still be
// valid, and checks what Validate checks.
func parseRequest(b []byte) (rawRequest, error) {
	if len(b) < 5 {
		if !bytes.HasPrefix(reqMagic[:], b[:min(len(b), 4)]) {
			return rawRequest{}, fmt.Errorf("not a GIN plan request (header %q)", b)
		}
		return rawRequest{}, errShort
	}
	if [4]byte(b[:4]) != reqMagic || (Form(b[4]) != FormPlan && Form(b[4]) != FormTable) {
		return rawRequest{}, fmt.Errorf("not a GIN plan request (header %q)", b[:5])
	}
	r := rawRequest{form: Form(b[4])}
	rest := b[5:]
	var err error
	if r.jobID, rest, err = cutString16(rest, MaxJobID, "job id"); err != nil {
		return rawRequest{}, err
	}
	if r.nodes, rest, err = cutString16(rest, MaxNodes, "node list"); err != nil {
		return rawRequest{}, err
	}
	if len(rest) < 4 {
		return rawRequest{}, errShort
	}
	r.gpusPerNode = binary.BigEndian.Uint32(rest)
	switch {
	case len(r.jobID) == 0:
		return rawRequest{}, errors.New("empty job id")
	case bytes.ContainsFunc(r.jobID, isControl) || bytes.ContainsFunc(r.nodes, isControl):
		return rawRequest{}, errors.New("control characters in the job id or node list")
	}
	return r, nil
}

func isControl(c rune) bool { return c < 0x20 || c == 0x7f }

// request is r with its strings copied.
func (r rawRequest) request() Request {
	return Request{JobID: string(r.jobID), Nodes: string(r.nodes), GPUsPerNode: r.gpusPerNode, Form: r.form}
}

func cutString16(b []byte, max int, what string) (s, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, errShort
	}
	n := int(binary.BigEndian.Uint16(b))
	if n > max {
		return nil, nil, fmt.Errorf("%s of %d bytes, more than %d", what, n, max)
	}
	if len(b) < 2+n {
		return nil, nil, errShort
	}
	return b[2 : 2+n], b[2+n:], nil
}

// AppendResponse encodes r after b.
func AppendResponse(b []byte, r Response) ([]byte, error) {
	max := MaxMessage
	if r.Status == StatusOK {
		max = planread.MaxBytes
	}
	if len(r.Hash) > MaxHash || len(r.Body) > max {
		return nil, fmt.Errorf("response too large: hash %d bytes, body %d bytes (limit %d)", len(r.Hash), len(r.Body), max)
	}
	b = append(b, respMagic[:]...)
	b = append(b, version, byte(r.Status))
	b = appendString16(b, r.Hash)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Body)))
	return append(b, r.Body...), nil
}

// ReadResponse decodes one response from rd, bounded by the wire limits.
func ReadResponse(rd io.Reader) (Response, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(rd, hdr[:]); err != nil {
		return Response{}, fmt.Errorf("response header: %w", err)
	}
	if [4]byte(hdr[:4]) != respMagic || hdr[4] != version {
		return Response{}, fmt.Errorf("not a GIN plan response (header %q)", hdr[:5])
	}
	r := Response{Status: Status(hdr[5])}
	if r.Status > StatusBadRequest {
		return Response{}, fmt.Errorf("unknown status %d", hdr[5])
	}
	var err error
	if r.Hash, err = readString16(rd, MaxHash, "content hash"); err != nil {
		return Response{}, err
	}
	var l [4]byte
	if _, err := io.ReadFull(rd, l[:]); err != nil {
		return Response{}, fmt.Errorf("response length: %w", err)
	}
	n, max := binary.BigEndian.Uint32(l[:]), uint32(MaxMessage)
	if r.Status == StatusOK {
		max = planread.MaxBytes
	}
	if n > max {
		return Response{}, fmt.Errorf("response body of %d bytes, more than %d", n, max)
	}
	r.Body = make([]byte, n)
	if _, err := io.ReadFull(rd, r.Body); err != nil {
		return Response{}, fmt.Errorf("response body (%d bytes): %w", n, err)
	}
	return r, nil
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readString16(rd io.Reader, max int, what string) (string, error) {
	var l [2]byte
	if _, err := io.ReadFull(rd, l[:]); err != nil {
		return "", fmt.Errorf("%s length: %w", what, err)
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > max {
		return "", fmt.Errorf("%s of %d bytes, more than %d", what, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rd, b); err != nil {
		return "", fmt.Errorf("%s (%d bytes): %w", what, n, err)
	}
	return string(b), nil
}
