package plan

import ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"

// AlgorithmName is NCCL's own name for a (the spelling of NCCL_ALGO and of
// its INFO lines: "Ring", "NVLSTree"), or "" for ALGORITHM_UNSPECIFIED and
// values this build does not know: the caller says what leaving the choice
// to NCCL reads as where it prints it.
func AlgorithmName(a ginv1.Algorithm) string {
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
	return ""
}

// ProtocolName is NCCL's own name for p (NCCL_PROTO's spelling: "LL",
// "LL128", "Simple"), or "" for PROTOCOL_UNSPECIFIED and unknown values.
func ProtocolName(p ginv1.Protocol) string {
	switch p {
	case ginv1.Protocol_PROTOCOL_LL:
		return "LL"
	case ginv1.Protocol_PROTOCOL_LL128:
		return "LL128"
	case ginv1.Protocol_PROTOCOL_SIMPLE:
		return "Simple"
	}
	return ""
}
