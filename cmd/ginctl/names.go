package main

import ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"

// algoName is NCCL's name for an algorithm ("NCCL" when the plan leaves
// the choice to NCCL).
func algoName(a ginv1.Algorithm) string {
	switch a {
	case ginv1.Algorithm_ALGORITHM_TREE:
		return "Tree"
	case ginv1.Algorithm_ALGORITHM_RING:
		return "Ring"
	case ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT:
		return "CollNetDirect"
	case ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN:
		return "CollNetChain"
	case ginv1.Algorithm_ALGORITHM_NVLS:
		return "NVLS"
	case ginv1.Algorithm_ALGORITHM_NVLS_TREE:
		return "NVLSTree"
	case ginv1.Algorithm_ALGORITHM_PAT:
		return "PAT"
	}
	return "NCCL"
}

// protoName is NCCL's name for a protocol.
func protoName(p ginv1.Protocol) string {
	switch p {
	case ginv1.Protocol_PROTOCOL_LL:
		return "LL"
	case ginv1.Protocol_PROTOCOL_LL128:
		return "LL128"
	case ginv1.Protocol_PROTOCOL_SIMPLE:
		return "Simple"
	}
	return "NCCL"
}
