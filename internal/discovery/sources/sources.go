package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/jsonout"
)

// Options are what every source needs to know about the node it runs on.
type Options struct {
	// NodeName is the name the inventory is reported under.
	NodeName string
	// Sim configures simulated sources (ignored by the others).
	Sim sim.NodeOptions
	// Auto configures the real-hardware source.
	Auto AutoOptions
}

// Open returns the source named by spec: "sim:<profile>", "file:<path>" or "auto".
func Open(spec string, opts Options) (discovery.Source, error) {
	if opts.NodeName == "" {
		return nil, errors.New("discovery: node name is empty")
	}
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "sim":
		if arg == "" {
			return nil, fmt.Errorf("discovery: --source %q: missing profile, want sim:<profile> (one of %s)", spec, strings.Join(sim.Profiles(), ", "))
		}
		o := opts.Sim
		o.NodeName = opts.NodeName
		s, err := sim.NewSource(arg, o)
		if err != nil {
			return nil, fmt.Errorf("discovery: --source %q: %w", spec, err)
		}
		return s, nil
	case "file":
		if arg == "" {
			return nil, fmt.Errorf("discovery: --source %q: missing path, want file:<path>", spec)
		}
		return &fileSource{spec: spec, path: arg, nodeName: opts.NodeName}, nil
	case "auto", "":
		return openAuto(opts, false)
	case "nvml":
		return openAuto(opts, true)
	default:
		return nil, fmt.Errorf("discovery: unknown --source %q: want auto, nvml, sim:<profile> or file:<path>", spec)
	}
}

// maxInventoryFile bounds what file: reads.
const maxInventoryFile = 16 << 20

// fileSource replays an inventory saved with `gin-agent --once -o json`.
type fileSource struct {
	spec, path, nodeName string
}

func (f *fileSource) Name() string { return f.spec }

func (f *fileSource) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	if st.Size() > maxInventoryFile {
		return nil, fmt.Errorf("file source: %s is %d bytes, more than the %d allowed", f.path, st.Size(), maxInventoryFile)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("file source: %w", err)
	}
	inv := &ginv1.NodeInventory{}
	if err := jsonout.Unmarshal(b, inv); err != nil {
		return nil, fmt.Errorf("file source: %s: %w", f.path, err)
	}
	inv.NodeName = f.nodeName
	inv.Generation = 0
	inv.Source = f.spec
	return inv, nil
}

// splitCommand splits a command line on white space (no quoting).
func splitCommand(c string) []string {
	f := strings.Fields(c)
	if len(f) == 0 {
		return []string{""}
	}
	return f
}
