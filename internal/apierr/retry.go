package apierr

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// maxRetryHint bounds a master's retry hint, so that a wrong one cannot park
// a client for long.
const maxRetryHint = time.Minute

// RetryHint is the RetryInfo delay of the gRPC status in err's chain (a
// master that refused a Hello because too many handshakes are in
// progress says when to come back), at most a minute; 0 without one.
func RetryHint(err error) time.Duration {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return 0
	}
	for _, d := range se.GRPCStatus().Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return min(max(ri.GetRetryDelay().AsDuration(), 0), maxRetryHint)
		}
	}
	return 0
}
