package main

import (
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/plan"
)

// algoName is NCCL's name for an algorithm ("NCCL" when the plan leaves
// the choice to NCCL).
func algoName(a ginv1.Algorithm) string { return orNCCL(plan.AlgorithmName(a)) }

// protoName is NCCL's name for a protocol ("NCCL" when the plan leaves
// the choice to NCCL).
func protoName(p ginv1.Protocol) string { return orNCCL(plan.ProtocolName(p)) }

func orNCCL(name string) string {
	if name == "" {
		return "NCCL"
	}
	return name
}
