// Package nccllog reads NCCL's own log (NCCL_DEBUG=INFO output) as users
// paste it: any NCCL_DEBUG_SUBSYS, ranks interleaved, lines prefixed by
// srun -l ("3: "), mpirun --tag-output ("[1,3]<stdout>:"), torchrun
// ("[rank3]:") or timestamps. Parse turns it into what each NCCL process
// said (version, network, the environment variables it obeyed, its
// channels and the NICs behind them); Diagnose joins that with GIN's view of
// the nodes and names the published failure modes it recognises (sockets
// while InfiniBand is up, "NET/IB : No device found" on a node whose ports
// are active, variables that forced a transport, P2P through shared memory
// where NVLink exists, a farther NIC than the GPU's nearest, ranks on
// different NCCL versions), each with its severity, the lines it rests on
// and the fix.
package nccllog
