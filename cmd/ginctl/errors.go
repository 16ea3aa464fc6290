package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/dialerr"
)

// This file is the one place where ginctl turns errors into what the user
// reads: one sentence naming what was wrong and what to do, no internal
// prefixes, and the exit status (exitUsage for what the user typed,
// exitErr for the rest).

// usageError marks bad arguments (exit 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// args is a cobra.PositionalArgs naming the positional arguments, so that a
// missing one is named ("missing NAME") instead of "accepts 1 arg(s)".
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) < len(names) {
			return usagef("missing %s (usage: %s)", strings.Join(names[len(got):], " and "), cmd.UseLine())
		}
		if len(got) > len(names) {
			return usagef("unexpected argument %q (usage: %s)", got[len(names)], cmd.UseLine())
		}
		return nil
	}
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, got []string) error {
	if len(got) > 0 {
		return usagef("unexpected argument %q (usage: %s)", got[0], cmd.UseLine())
	}
	return nil
}

// pflag's value errors: `invalid argument "x" for "--gpus" flag:
// strconv.ParseUint: parsing "x": invalid syntax`.
var flagValueErr = regexp.MustCompile(`^invalid argument "(.*)" for "(.*)" flag: (.*)$`)

// flagError rewrites a flag parsing error into a usage error in words.
func flagError(err error) error {
	m := flagValueErr.FindStringSubmatch(err.Error())
	if m == nil {
		return usageError{err}
	}
	value, flag, why := m[1], m[2], m[3]
	if strings.HasSuffix(why, "value out of range") {
		return usagef("%s %q: too large", flag, value)
	}
	switch {
	case strings.HasPrefix(why, "strconv.ParseUint"):
		return usagef("%s %q: want a whole number, 0 or more", flag, value)
	case strings.HasPrefix(why, "strconv.ParseInt"):
		return usagef("%s %q: want a whole number", flag, value)
	case strings.HasPrefix(why, "strconv.ParseFloat"):
		return usagef("%s %q: want a number", flag, value)
	case strings.HasPrefix(why, "strconv.ParseBool"):
		return usagef("%s %q: want true or false", flag, value)
	case strings.HasPrefix(why, "time: "):
		return usagef("%s %q: want a duration such as 30s or 2m", flag, value)
	}
	return usagef("%s %q: %s", flag, value, why)
}

// flagName is what the user typed for a request field the master names in
// its BadRequest details.
func flagName(field string) string {
	switch field {
	case "nodes":
		return "--nodes"
	case "job_id":
		return "--job"
	case "gpus":
		return "--gpus"
	case "gpus_per_node":
		return "--gpus-per-node"
	case "collective":
		return "--collective"
	case "size_bytes":
		return "--size"
	case "ttl_seconds":
		return "--ttl"
	case "node":
		return "--node"
	case "from_gpu":
		return "the first GPU"
	case "to_gpu":
		return "the second GPU"
	case "server_id":
		return "the server id"
	case "name":
		return "the node name"
	}
	return field
}

// describe is the sentence ginctl prints for err (after "ginctl: ").
func describe(err error) string {
	if isUsage(err) {
		return err.Error()
	}
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		return unavailable(msg)
	case codes.DeadlineExceeded:
		return "the master did not answer in time; try a longer --timeout, or check the master's health (ginctl cluster)"
	case codes.InvalidArgument:
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
				v := br.GetFieldViolations()[0]
				return fmt.Sprintf("%s: %s", flagName(v.GetField()), strings.TrimPrefix(v.GetDescription(), "hostlist: "))
			}
		}
		return msg
	case codes.NotFound:
		switch {
		case strings.HasSuffix(msg, "has no plan"):
			return msg + "; give the job's nodes (--nodes LIST) to create one"
		case strings.HasPrefix(msg, "server "):
			return msg + " (ginctl members lists the masters)"
		case strings.HasPrefix(msg, "node") || strings.HasPrefix(msg, "GPU"):
			return msg + " (ginctl nodes lists the nodes)"
		}
		return msg
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return "the master failed: " + msg + " (a bug in GIN; the master's log has the details)"
	case codes.Unimplemented:
		return "the master does not know this request (" + msg + "); it is older than this ginctl: upgrade the masters"
	case codes.PermissionDenied, codes.Unauthenticated:
		return "the master refused: " + msg
	}
	return msg
}

// unavailable explains why no master answered and what to check.
func unavailable(msg string) string {
	switch dialerr.Classify(msg) {
	case dialerr.TLSRequired:
		return "the master at " + addrs(msg) + " closed the connection without answering: it serves mutual TLS and ginctl gave no certificate; give --tls-ca, --tls-cert and --tls-key (or GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY; docs/SECURITY.md)"
	case dialerr.NotTLS:
		return "the --master address does not speak TLS: a master started with --insecure (leave out --tls-* and GIN_TLS_*) or its HTTP port (/metrics, 5002 by default; give its gRPC port, 5000 by default)"
	case dialerr.HTTPPort:
		return "the --master address answers HTTP, not gRPC: it is the master's HTTP port (/metrics, 5002 by default); give its gRPC port (5000 by default)"
	case dialerr.Refused:
		return "cannot reach a master: nothing listens at " + addrs(msg) + " (is gin-master running? set --master or GIN_MASTER_HOST)"
	case dialerr.NoSuchHost:
		return "cannot reach a master: unknown host in " + addrs(msg) + " (check --master or GIN_MASTER_HOST)"
	case dialerr.Expired:
		return "the TLS handshake with " + addrs(msg) + " failed: a certificate has expired or is not valid yet (the master's, or --tls-cert's: ginctl tls cert create issues a new one; check both hosts' clocks; docs/TROUBLESHOOTING.md)"
	case dialerr.WrongCA:
		return "the TLS handshake with " + addrs(msg) + " failed: the certificates are of another CA (the master's is not signed by --tls-ca, or the master does not know the CA of --tls-cert); give the cluster's ca.pem and a certificate it signed (docs/SECURITY.md)"
	}
	return "cannot reach a master: " + msg + " (is gin-master running? set --master or GIN_MASTER_HOST)"
}

// addrs are the master addresses a "no master answered (a: ...;
// b: ...)" message names.
var addrRE = regexp.MustCompile(`(?:\(|; )([^ ;()]+): `)

func addrs(msg string) string {
	var out []string
	for _, m := range addrRE.FindAllStringSubmatch(msg, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		return "the given address"
	}
	return strings.Join(out, ", ")
}
