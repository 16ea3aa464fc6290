package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

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

// denyRequest is what `tls deny` sends: the SERIAL argument, or the
// serial, identity and expiry of the --cert file.
func denyRequest(args []string, certFile, reason string) (*ginv1.DenyCertificateRequest, error) {
	switch {
	case len(args) == 1 && certFile != "":
		return nil, usagef("give SERIAL or --cert FILE, not both")
	case len(args) == 1:
		serial, err := serialArg(args[0])
		if err != nil {
			return nil, err
		}
		return &ginv1.DenyCertificateRequest{Serial: serial, Reason: reason}, nil
	case certFile != "":
		c, err := pki.ReadCertificate(certFile)
		if err != nil {
			return nil, usagef("--cert: %v", err)
		}
		req := &ginv1.DenyCertificateRequest{Serial: pki.FormatSerial(c.SerialNumber), Reason: reason, NotAfter: timestamppb.New(c.NotAfter)}
		if id, err := pki.IdentityFromCert(c); err == nil {
			req.Identity = id.String()
		}
		return req, nil
	}
	return nil, usagef("missing SERIAL (or --cert FILE) (usage: ginctl tls deny SERIAL|--cert FILE [--reason TEXT])")
}

func (a *app) tlsDenyCmd() *cobra.Command {
	var reason, certFile string
	cmd := &cobra.Command{
		Use:   "deny SERIAL|--cert FILE",
		Short: "Deny a certificate: every master refuses it from now on (admin)",
		Long: `Put a certificate's serial number on the cluster's deny list, replicated
through Raft. From the commit on, every master refuses the certificate: its gRPC
calls get UNAUTHENTICATED naming the serial, the connections it holds open
(an agent's session, a watch) are closed, and a master certificate is refused
in the Raft TLS handshake. SERIAL is hex as ` + "`openssl x509 -noout -serial`" + ` and
` + "`ginctl tls cert create`" + ` print it, in either case, with or without ':'.
--cert FILE takes the serial from the certificate and records its identity and
expiry too (then ` + "`ginctl tls allow --expired`" + ` can take the entry off once the
certificate has expired). The list holds at most 10000 entries. The answer
comes once every master the leader reaches has applied the entry; one still
behind at --timeout is named in the error (the entry stays committed).`,
		Example: `  ginctl tls deny 3F2A9C01D4E5B6A7 --reason "laptop stolen"
  ginctl tls deny --cert /etc/gin/tls/agent-node007.pem --reason "node stolen"
  ginctl tls deny $(openssl x509 -noout -serial -in agent-node001.pem)`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) > 1 {
				return usagef("unexpected argument %q (usage: %s)", got[1], cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := denyRequest(args, certFile, reason)
			if err != nil {
				return err
			}
			var resp *ginv1.DenyCertificateResponse
			if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
				resp, err = ac.DenyCertificate(ctx, req)
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
	cmd.Flags().StringVar(&certFile, "cert", "", "deny this certificate (PEM): its serial, identity and expiry")
	return cmd
}

func (a *app) tlsAllowCmd() *cobra.Command {
	var expired bool
	cmd := &cobra.Command{
		Use:   "allow SERIAL|--expired",
		Short: "Take a certificate off the deny list (admin)",
		Long: `Take a serial off the deny list, or with --expired every entry whose
certificate has expired (entries made with ` + "`ginctl tls deny --cert`" + ` know when;
an expired certificate is refused in the TLS handshake anyway). The answer
comes once every master the leader reaches has applied the change; one still
behind at --timeout is named in the error (the change stays committed).`,
		Args: func(cmd *cobra.Command, got []string) error {
			switch {
			case len(got) > 1:
				return usagef("unexpected argument %q (usage: %s)", got[1], cmd.UseLine())
			case len(got) == 1 && expired:
				return usagef("give SERIAL or --expired, not both")
			case len(got) == 0 && !expired:
				return usagef("missing SERIAL (or --expired) (usage: %s)", cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var serials []string
			if expired {
				var err error
				if serials, err = a.expiredDenied(cmd.Context()); err != nil {
					return err
				}
			} else {
				serial, err := serialArg(args[0])
				if err != nil {
					return err
				}
				serials = []string{serial}
			}
			var resps []*ginv1.AllowCertificateResponse
			for _, serial := range serials {
				var resp *ginv1.AllowCertificateResponse
				if err := a.withAdmin(cmd.Context(), func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
					resp, err = ac.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: serial})
					return err
				}); err != nil {
					return err
				}
				resps = append(resps, resp)
				if a.output != "json" {
					fmt.Fprintf(a.stdout, "allowed serial %s again (commit index %d)\n", serial, resp.GetIndex())
				}
			}
			if a.output == "json" {
				if !expired {
					return a.printJSON(resps[0])
				}
				return a.printJSON(resps)
			}
			if expired {
				a.summary("%d expired entr(y/ies) taken off the deny list", len(serials))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&expired, "expired", false, "take off every entry whose certificate has expired")
	return cmd
}

// expiredDenied lists the denied serials whose certificates have expired.
func (a *app) expiredDenied(ctx context.Context) ([]string, error) {
	var resp *ginv1.ListDeniedCertificatesResponse
	if err := a.withAdmin(ctx, func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
		resp, err = ac.ListDeniedCertificates(ctx, &ginv1.ListDeniedCertificatesRequest{})
		return err
	}); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range resp.GetEntries() {
		if e.GetNotAfter() != nil && e.GetNotAfter().AsTime().Before(time.Now()) {
			out = append(out, e.GetSerial())
		}
	}
	return out, nil
}

func (a *app) tlsDeniedCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "denied",
		Short: "List the deny list (admin)",
		Long:  "List the denied certificates: serial, identity and expiry (when known), when, by whom, why. -o json prints an array of objects.",
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
			t := a.newTable("SERIAL", "IDENTITY", "NOT_AFTER", "DENIED_AT", "BY", "REASON")
			for _, e := range resp.GetEntries() {
				t.row(e.GetSerial(), dash(e.GetIdentity()), rfc3339(e.GetNotAfter()), rfc3339(e.GetDeniedAt()), dash(e.GetDeniedBy()), dash(e.GetReason()))
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.summary("%d denied certificate(s)", len(resp.GetEntries()))
			return nil
		},
	}
}

// rfc3339 is a time as the tables print it, "-" for none.
func rfc3339(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}
