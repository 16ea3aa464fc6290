package nccllog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Bounds: a log larger than MaxBytes is refused, lines longer than MaxLine
// are skipped (counted), at most MaxProcs processes are tracked and at most
// MaxEvidence lines kept per finding.
const (
	MaxBytes    = 256 << 20
	MaxLine     = 64 << 10
	MaxProcs    = 1 << 16
	MaxEvidence = 8
	maxChannels = 256 // per process, kept for the NIC rules
)

// ErrTooLarge is returned for a log over MaxBytes.
var ErrTooLarge = errors.New("NCCL log too large")

// Line is one log line, by its 1-based number in the input, as written.
type Line struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

// Proc is one NCCL process (host and pid), with what it logged.
type Proc struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Ranks are the communicator ranks the process holds, by CUDA device
	// ("[dev]" of its lines), with their PCI bus ids when logged.
	Ranks []Rank `json:"ranks"`
	// Version is "2.18.5+cuda12.2" ("" when the process did not print it).
	Version     string `json:"version"`
	VersionLine Line   `json:"version_line"`
	// Network is NCCL's choice: "IB", "Socket", or a plugin's name.
	Network     string `json:"network"`
	NetworkLine Line   `json:"network_line"`
	// IBDevices are NET/IB's devices in index order ("mlx5_0:1"); its
	// device list line.
	IBDevices []string `json:"ib_devices"`
	IBLine    Line     `json:"ib_line"`
	// IBNoDevice is NET/IB's "No device found" line (N 0: none).
	IBNoDevice Line `json:"ib_no_device"`
	// Env are the variables NCCL said it took from the environment.
	Env map[string]EnvVar `json:"env"`
	// Channels are its channel connections (at most 256 kept).
	Channels []Channel `json:"channels"`
	// Warnings are its NCCL WARN lines (at most MaxEvidence kept).
	Warnings []Line `json:"warnings"`
}

// Rank is one communicator rank of a process.
type Rank struct {
	Rank    int    `json:"rank"`
	NRanks  int    `json:"nranks"`
	CUDADev int    `json:"cuda_dev"`
	BusID   string `json:"bus_id"` // "0000:31:00.0"; "" unknown
}

// EnvVar is one "NAME set by environment to VALUE" line.
type EnvVar struct {
	Value string `json:"value"`
	Line  Line   `json:"line"`
}

// Channel is one "Channel NN/M : a[da] -> b[db] [send] via TRANSPORT" line.
type Channel struct {
	From, To  int    `json:"-"`
	Dev       int    `json:"-"` // the logging thread's CUDA device
	Transport string `json:"-"` // "NET/IB/0/GDRDMA", "P2P/IPC", "SHM/direct/direct"
	Line      Line   `json:"-"`
}

// Log is a parsed NCCL log.
type Log struct {
	Procs []*Proc `json:"procs"`
	// Unattributed are "NCCL version X" lines printed without NCCL's
	// host:pid prefix (PyTorch prints the version bare): they count for
	// the version check.
	Unattributed []VersionLine `json:"-"`
	// Lines is the number of input lines, NCCLLines those NCCL wrote,
	// Skipped those too long to read.
	Lines, NCCLLines, Skipped int `json:"-"`
}

// VersionLine is a bare "NCCL version X" line.
type VersionLine struct {
	Version string
	Line    Line
}

var bareVersionRe = regexp.MustCompile(`(?:^|[\s:\]>])NCCL version (\d+\.\d+\.\d+\S*)\s*$`)

var (
	// host:pid:tid [dev] NCCL INFO|WARN|TRACE|ERROR message, anywhere on
	// the line (prefixes of launchers and loggers before it).
	lineRe    = regexp.MustCompile(`(?:^|[\s:\]>])([A-Za-z0-9][A-Za-z0-9._\-<>]*):(\d{1,10}):(\d{1,10}) \[(\d{1,4})\] (?:\S+:\d+ )?NCCL (INFO|WARN|TRACE|ERROR|ABORT) ?(.*)$`)
	versionRe = regexp.MustCompile(`^NCCL version (\S+)`)
	envRe     = regexp.MustCompile(`^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?\s*$`)
	networkRe = regexp.MustCompile(`^Using network (\S+)`)
	// NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ... ; OOB ib0:...
	// and 2.2x's merged form [0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]={...}.
	ibUsingRe  = regexp.MustCompile(`^NET/IB ?: ?Using (.*)$`)
	ibDevRe    = regexp.MustCompile(`\[(\d+)\]\s*([A-Za-z0-9_.\-]+:\d+)/(IB|RoCE)`)
	ibMergedRe = regexp.MustCompile(`\[(\d+)\]=\{([^}]*)\}`)
	// comm 0x.. rank 2 nranks 3 cudaDev 0 nvmlDev 0 busId 31000 ...
	rankRe    = regexp.MustCompile(`\brank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)?(?: busId ([0-9a-fA-F]+))?`)
	channelRe = regexp.MustCompile(`^(?:Channel|Ring) \d+(?:/\d+)? ?: ?(\d+)(?:\[\d+\])? -> (\d+)(?:\[\d+\])?(?: \[(?:send|receive)\])? via (\S+(?: pointer)?)`)
)

// Parse reads an NCCL log. Lines that are not NCCL's are counted and left
// out; a log over MaxBytes is an error (nothing is returned).
func Parse(r io.Reader) (*Log, error) { return parse(r, MaxBytes) }

func parse(r io.Reader, maxBytes int) (*Log, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, int64(maxBytes)+1), 64<<10)
	log := &Log{}
	procs := map[string]*Proc{}
	read := 0
	for {
		raw, tooLong, err := readLine(br)
		read += len(raw)
		if read > maxBytes {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
		}
		if len(raw) > 0 || err == nil {
			log.Lines++
			if tooLong {
				log.Skipped++
			} else {
				parseLine(log, procs, log.Lines, strings.TrimRight(string(raw), "\r\n"))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading NCCL log: %w", err)
		}
	}
	for _, p := range procs {
		sort.Slice(p.Ranks, func(i, j int) bool { return p.Ranks[i].Rank < p.Ranks[j].Rank })
		log.Procs = append(log.Procs, p)
	}
	sort.Slice(log.Procs, func(i, j int) bool {
		a, b := log.Procs[i], log.Procs[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.PID < b.PID
	})
	return log, nil
}

// readLine reads one line; a line over MaxLine is consumed and reported
// too long (its bytes are not kept).
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line)+len(chunk) > MaxLine {
			tooLong = true
			line = line[:0]
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if err != nil || !isPrefix {
			if err == nil {
				line = append(line, '\n')
			}
			return line, tooLong, err
		}
	}
}

func parseLine(log *Log, procs map[string]*Proc, n int, text string) {
	m := lineRe.FindStringSubmatch(text)
	if m == nil {
		if v := bareVersionRe.FindStringSubmatch(text); v != nil && len(log.Unattributed) < MaxEvidence {
			log.NCCLLines++
			log.Unattributed = append(log.Unattributed, VersionLine{v[1], Line{N: n, Text: clip(text)}})
		}
		return
	}
	log.NCCLLines++
	pid, err1 := strconv.Atoi(m[2])
	dev, err2 := strconv.Atoi(m[4])
	if err1 != nil || err2 != nil {
		return
	}
	host := m[1]
	key := host + ":" + m[2]
	p := procs[key]
	if p == nil {
		if len(procs) >= MaxProcs {
			return
		}
		p = &Proc{Host: host, PID: pid, Env: map[string]EnvVar{}}
		procs[key] = p
	}
	level, msg := m[5], strings.TrimSpace(m[6])
	ln := Line{N: n, Text: clip(text)}
	if level == "WARN" || level == "ERROR" {
		if len(p.Warnings) < MaxEvidence {
			p.Warnings = append(p.Warnings, ln)
		}
		return
	}
	switch {
	case versionRe.MatchString(msg):
		if p.Version == "" {
			p.Version, p.VersionLine = versionRe.FindStringSubmatch(msg)[1], ln
		}
	case envRe.MatchString(msg):
		e := envRe.FindStringSubmatch(msg)
		if _, ok := p.Env[e[1]]; !ok && len(p.Env) < 256 {
			p.Env[e[1]] = EnvVar{Value: clip(strings.TrimSpace(e[2])), Line: ln}
		}
	case networkRe.MatchString(msg):
		if p.Network == "" {
			p.Network, p.NetworkLine = networkRe.FindStringSubmatch(msg)[1], ln
		}
	case strings.HasPrefix(msg, "NET/IB") && strings.Contains(msg, "No device found"):
		if p.IBNoDevice.N == 0 {
			p.IBNoDevice = ln
		}
	case ibUsingRe.MatchString(msg):
		if p.IBLine.N == 0 {
			devs := ibDevices(ibUsingRe.FindStringSubmatch(msg)[1])
			if len(devs) > 0 {
				p.IBDevices, p.IBLine = devs, ln
			}
		}
	case channelRe.MatchString(msg):
		c := channelRe.FindStringSubmatch(msg)
		from, _ := strconv.Atoi(c[1])
		to, _ := strconv.Atoi(c[2])
		if len(p.Channels) < maxChannels {
			p.Channels = append(p.Channels, Channel{From: from, To: to, Dev: dev, Transport: c[3], Line: ln})
		}
	default:
		if r := rankRe.FindStringSubmatch(msg); r != nil && (strings.Contains(msg, "Init") || strings.HasPrefix(msg, "comm ") || strings.HasPrefix(msg, "ncclCommInitRank")) {
			addRank(p, r)
		}
	}
}

func addRank(p *Proc, r []string) {
	rank, _ := strconv.Atoi(r[1])
	nranks, _ := strconv.Atoi(r[2])
	cuda, _ := strconv.Atoi(r[3])
	bus := ""
	if r[4] != "" {
		if v, err := strconv.ParseUint(r[4], 16, 32); err == nil {
			// NCCL prints the bus id's hex digits as one number
			// (busIdToInt64): "busId 31000" is 0000:31:00.0, i.e.
			// domain<<20 | bus<<12 | device<<4 | function.
			bus = fmt.Sprintf("%04x:%02x:%02x.%x", v>>20, (v>>12)&0xff, (v>>4)&0xff, v&0xf)
		}
	}
	for i, x := range p.Ranks {
		if x.Rank == rank && x.NRanks == nranks {
			if x.BusID == "" {
				p.Ranks[i].BusID = bus
			}
			return
		}
	}
	if len(p.Ranks) < 64 {
		p.Ranks = append(p.Ranks, Rank{Rank: rank, NRanks: nranks, CUDADev: cuda, BusID: bus})
	}
}

// ibDevices reads NET/IB's device list in index order.
func ibDevices(s string) []string {
	var out []string
	if ms := ibMergedRe.FindAllStringSubmatch(s, 64); len(ms) > 0 {
		for _, m := range ms {
			var names []string
			for _, d := range ibDevRe.FindAllStringSubmatch(m[2], 16) {
				names = append(names, d[2])
			}
			out = append(out, strings.Join(names, "+"))
		}
		return out
	}
	for _, d := range ibDevRe.FindAllStringSubmatch(s, 64) {
		out = append(out, d[2])
	}
	return out
}

// clip bounds a line kept as evidence.
func clip(s string) string {
	const max = 512
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
