// Package render prints GIN's answers for people: the cluster-wide
// `nvidia-smi topo -m` matrix of `ginctl topo -m`, in the same tab-separated
// layout and with the same legend as NVIDIA's tool, plus GIN's MNNVL and
// NET# classes.
//
// It works on the gin.v1 wire types (GetMatrixResponse), so ginctl renders
// exactly what the master sent.
package render
