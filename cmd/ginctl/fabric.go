package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/fabricscan"
)

func (a *app) fabricCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Manage the scale-out fabric topology",
	}
	var file string
	imp := &cobra.Command{
		Use:   "import --ibnetdiscover FILE",
		Short: "Replace the fabric topology with an ibnetdiscover dump",
		Long: `Parse the output of ibnetdiscover (a file, or - for standard input) and replace
the cluster's fabric topology with it, through Raft. A dump that does not parse
(truncated, malformed) changes nothing and the error names the line.
It reports how many of the cluster's compute ports the fabric connects and
warns when it connects none (a dump of another fabric).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("--ibnetdiscover FILE is required")
			}
			in, closeIn, err := a.openInput("--ibnetdiscover", file)
			if err != nil {
				return err
			}
			defer closeIn()
			topo, err := fabricscan.ParseIBNetDiscover(in)
			if err != nil {
				return err
			}
			var resp *ginv1.ImportFabricResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.ImportFabric(ctx, &ginv1.ImportFabricRequest{Fabric: topo})
				return err
			}); err != nil {
				return err
			}
			if resp.GetMatchedPorts() == 0 && resp.GetComputePorts() > 0 {
				fmt.Fprintf(a.stderr, "ginctl: warning: the imported fabric connects none of the cluster's %d compute ports: "+
					"it is another fabric, or the agents report other port GUIDs (compare the dump with ginctl node NAME -o json | jq '.inventory.hcas[].ports[].port_guid')\n",
					resp.GetComputePorts())
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			fmt.Fprintf(a.stdout, "imported %d switches and %d links at index %d; they connect %d of the cluster's %d compute ports\n",
				resp.GetSwitches(), resp.GetLinks(), resp.GetIndex(), resp.GetMatchedPorts(), resp.GetComputePorts())
			return nil
		},
	}
	imp.Flags().StringVar(&file, "ibnetdiscover", "", "ibnetdiscover output to import (- for standard input)")
	cmd.AddCommand(imp)
	return cmd
}
