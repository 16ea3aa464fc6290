package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// The certificate deny list: `ginctl tls deny SERIAL`, `ginctl tls denied`,
// `ginctl tls allow SERIAL` (these talk to the masters; admin only).

// serialArg reads a SERIAL argument in any form people copy it (pki.ParseSerial).
func serialArg(s string) (string, error) {
	serial, err := pki.ParseSerial(s)
	if err != nil {
		return "", usagef("SERIAL: %v", err)
	}
	return serial, nil
}

func (a *app) tlsDenyCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "deny SERIAL",
		Short: "Deny a certificate: every master refuses it from now on (admin)",
		Long: `Put a certificate's serial number on the cluster's deny list, replicated
through Raft. From the commit on, every master refuses the certificate: its gRPC
calls get UNAUTHENTICATED naming the serial, the connections it holds open
(an agent's session, a watch) are closed, and a master certificate is refused
in the Raft TLS handshake. SERIAL is hex as ` + "`openssl x509 -noout -serial`" + ` and
` + "`ginctl tls cert create`" + ` print it, in either case, with or without ':'.
The list holds at most 10000 entries; ` + "`ginctl tls allow SERIAL`" + ` takes one off.`,
		Example: `  ginctl tls deny 3F2A9C01D4E5B6A7 --reason "laptop stolen"
  ginctl tls deny $(openssl x509 -noout -serial -in agent-node001.pem)`,
		Args: args("SERIAL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			serial, err := serialArg(args[0])
			if err != nil {
				return err
			}
			var resp *ginv1.DenyCertificateResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: serial, Reason: reason})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			if !resp.GetChanged() {
				fmt.Fprintf(a.stdout, "serial %s was already denied (commit index %d)\n", resp.GetEntry().GetSerial(), resp.GetEntry().GetIndex())
				return nil
			}
			fmt.Fprintf(a.stdout, "denied serial %s (commit index %d)\n", resp.GetEntry().GetSerial(), resp.GetIndex())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (at most 256 bytes), shown in the refusals and in `ginctl tls denied`")
	return cmd
}

func (a *app) tlsAllowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "allow SERIAL",
		Short: "Take a certificate off the deny list (admin)",
		Args:  args("SERIAL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			serial, err := serialArg(args[0])
			if err != nil {
				return err
			}
			var resp *ginv1.AllowCertificateResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: serial})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			fmt.Fprintf(a.stdout, "allowed serial %s again (commit index %d)\n", serial, resp.GetIndex())
			return nil
		},
	}
}

func (a *app) tlsDeniedCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "denied",
		Short: "List the deny list (admin)",
		Long:  "List the denied certificates: serial, when, by whom, why. -o json prints an array of objects.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *ginv1.ListDeniedCertificatesResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.ListDeniedCertificates(ctx, &ginv1.ListDeniedCertificatesRequest{})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp.GetEntries())
			}
			t := a.newTable("SERIAL", "DENIED_AT", "BY", "REASON")
			for _, e := range resp.GetEntries() {
				at := "-"
				if e.GetDeniedAt() != nil {
					at = e.GetDeniedAt().AsTime().UTC().Format(time.RFC3339)
				}
				t.row(e.GetSerial(), at, dash(e.GetDeniedBy()), dash(e.GetReason()))
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.summary("%d denied certificate(s)", len(resp.GetEntries()))
			return nil
		},
	}
}
