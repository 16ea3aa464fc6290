// Package rdmanl counts a node's RDMA queue pairs over the kernel's RDMA
// netlink interface (NETLINK_RDMA, the nldev client iproute2's `rdma resource
// show qp` uses): how many QPs each device and port has, by type (RC, UD,
// GSI, ...) and state (RTS, ERR, ...). A training job shows up as many RC QPs
// in RTS on its HCAs; QPs in ERR are a health signal.
//
// DumpQPs (Linux) does the socket work and returns raw netlink messages;
// ParseQPDump is a pure, bounded parser of those messages, tested with
// byte-exact recorded-shape replies, so all the decoding is testable on a
// machine with no RDMA device.
//
// Data flow: kernel (nldev) → DumpQPs → ParseQPDump → agent (QpSummary in the
// node inventory).
package rdmanl
