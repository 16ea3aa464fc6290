package devcluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gin-topology/gin/internal/discovery/sim"
)

// Fault is one simulated fabric fault of the dev cluster (--dev-fault):
//
//	NODE/HCA[:PORT]=down        a compute NIC port down
//	NODE/HCA[:PORT]=RATE        a NIC port retrained at RATE Gb/s (degraded)
//	NODE/GPU<i>/nvlink<l>=down  one NVLink of a GPU down
//	NODE/GPU<i>/xid=<n>         the GPU reported XID n (ginctl check: 79 fails, 94 warns)
//
// e.g. node001/mlx5_0=200, node002/mlx5_3=down, node001/GPU0/nvlink5=down,
// node003/GPU2/xid=79.
type Fault struct {
	Node string
	// HCA and Port name a NIC port (Port 1 by default); RateGbps 0 means down.
	HCA      string
	Port     uint32
	RateGbps uint32
	// GPU and Link name an NVLink (HCA empty).
	GPU, Link int
	// XID, when set, is an XID of GPU instead of a link fault.
	XID uint32
}

func (f Fault) String() string {
	if f.XID != 0 {
		return fmt.Sprintf("%s/GPU%d/xid=%d", f.Node, f.GPU, f.XID)
	}
	if f.HCA == "" {
		return fmt.Sprintf("%s/GPU%d/nvlink%d=down", f.Node, f.GPU, f.Link)
	}
	v := "down"
	if f.RateGbps > 0 {
		v = strconv.FormatUint(uint64(f.RateGbps), 10)
	}
	return fmt.Sprintf("%s/%s:%d=%s", f.Node, f.HCA, f.Port, v)
}

// ParseFault reads one --dev-fault value.
func ParseFault(s string) (Fault, error) {
	what, val, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || val == "" {
		return Fault{}, fmt.Errorf("fault %q: want NODE/HCA[:PORT]=down|RATE or NODE/GPU<i>/nvlink<l>=down", s)
	}
	parts := strings.Split(what, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return Fault{}, fmt.Errorf("fault %q: want NODE/HCA[:PORT] or NODE/GPU<i>/nvlink<l> before '='", s)
	}
	f := Fault{Node: parts[0]}
	if len(parts) == 3 && parts[2] == "xid" {
		gpu, err := strconv.Atoi(strings.TrimPrefix(parts[1], "GPU"))
		if !strings.HasPrefix(parts[1], "GPU") || err != nil || gpu < 0 {
			return Fault{}, fmt.Errorf("fault %q: want NODE/GPU<i>/xid=<n>", s)
		}
		x, err := strconv.ParseUint(val, 10, 16)
		if err != nil || x == 0 {
			return Fault{}, fmt.Errorf("fault %q: %q is not an XID (1..65535)", s, val)
		}
		f.GPU, f.XID = gpu, uint32(x)
		return f, nil
	}
	if len(parts) == 3 {
		gpu, err1 := strconv.Atoi(strings.TrimPrefix(parts[1], "GPU"))
		link, err2 := strconv.Atoi(strings.TrimPrefix(parts[2], "nvlink"))
		if !strings.HasPrefix(parts[1], "GPU") || !strings.HasPrefix(parts[2], "nvlink") || err1 != nil || err2 != nil || gpu < 0 || link < 0 {
			return Fault{}, fmt.Errorf("fault %q: want NODE/GPU<i>/nvlink<l>", s)
		}
		if val != "down" {
			return Fault{}, fmt.Errorf("fault %q: an NVLink can only be set down", s)
		}
		f.GPU, f.Link = gpu, link
		return f, nil
	}
	hca, port, hasPort := strings.Cut(parts[1], ":")
	if hca == "" {
		return Fault{}, fmt.Errorf("fault %q: no HCA name", s)
	}
	f.HCA, f.Port = hca, 1
	if hasPort {
		p, err := strconv.ParseUint(port, 10, 8)
		if err != nil || p == 0 {
			return Fault{}, fmt.Errorf("fault %q: port %q is not 1..255", s, port)
		}
		f.Port = uint32(p)
	}
	if val != "down" {
		r, err := strconv.ParseUint(val, 10, 32)
		if err != nil || r == 0 || r > 3200 {
			return Fault{}, fmt.Errorf("fault %q: %q is neither down nor a rate in Gb/s (1..3200)", s, val)
		}
		f.RateGbps = uint32(r)
	}
	return f, nil
}

// apply injects the fault into the simulated node.
func (f Fault) apply(src *sim.Source) error {
	if f.XID != 0 {
		return src.AddXID(f.GPU, f.XID)
	}
	if f.HCA == "" {
		return src.SetNVLinkState(f.GPU, f.Link, false)
	}
	return src.SetPortState(f.HCA, f.Port, f.RateGbps > 0, f.RateGbps)
}
