package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/fabricscan"
)

// ErrNoIBNetDiscover means the scan command is not installed on this node.
var ErrNoIBNetDiscover = errors.New("ibnetdiscover is not installed (infiniband-diags); this node cannot scan the fabric")

// IBNetDiscover returns a fabric scanner that runs command (normally
// "ibnetdiscover", which may carry arguments such as "-C mlx5_0") and parses
// its output. The command's output is bounded by fabricscan.MaxInputBytes.
func IBNetDiscover(command string) func(ctx context.Context) (*ginv1.FabricTopology, error) {
	return func(ctx context.Context) (*ginv1.FabricTopology, error) {
		args := strings.Fields(command)
		if len(args) == 0 {
			return nil, errors.New("fabric scan: empty command")
		}
		path, err := exec.LookPath(args[0])
		if err != nil {
			return nil, fmt.Errorf("fabric scan: %w (%v)", ErrNoIBNetDiscover, err)
		}
		cmd := exec.CommandContext(ctx, path, args[1:]...)
		var out limitedBuffer
		out.limit = fabricscan.MaxInputBytes
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("fabric scan: %s: %w: %s", command, err, strings.TrimSpace(tail(stderr.String(), 400)))
		}
		if out.over {
			return nil, fmt.Errorf("fabric scan: %s printed more than %d bytes", command, fabricscan.MaxInputBytes)
		}
		f, err := fabricscan.ParseIBNetDiscover(&out.buf)
		if err != nil {
			return nil, fmt.Errorf("fabric scan: %w", err)
		}
		return f, nil
	}
}

type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.limit {
		l.over = true
		return 0, errors.New("output limit exceeded")
	}
	return l.buf.Write(p)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
