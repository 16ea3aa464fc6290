package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gin-topology/gin/internal/buildinfo"
)

// versionJSON is `ginctl version -o json`.
type versionJSON struct {
	Binary   string `json:"binary"`
	Version  string `json:"version"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ginctl's version (the line --version prints in every GIN binary)",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if a.output == "json" {
				return a.printJSON(versionJSON{Binary: "ginctl", Version: buildinfo.String(), Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH})
			}
			_, err := fmt.Fprintln(a.stdout, buildinfo.Line("ginctl"))
			return err
		},
	}
}
