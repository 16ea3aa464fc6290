package estimate

import "strconv"

// gpuName is the "node/GPU<index>" spelling of a GPU.
func gpuName(node string, index int) string { return node + "/GPU" + strconv.Itoa(index) }
