// Package nvml is gin-agent's NVML collector: it reads the node's NVIDIA GPUs,
// their NVLinks and the NVSwitches those links reach, the GPUs' multi-node
// NVLink (MNNVL) fabric membership, the per-link error and throughput
// counters Prometheus scrapes, and the pairwise NVML topology (PCIe common
// ancestor, P2P status) used to cross-check the sysfs PCIe tree.
//
// # Build
//
// NVML is reached through github.com/NVIDIA/go-nvml, which needs cgo to
// compile (it dlopens libnvidia-ml.so.1 at run time; the library is not
// needed to build). The files that import go-nvml carry //go:build cgo; with
// CGO_ENABLED=0 a stub with the same exported API is built instead: New
// returns ErrNoNVML. NVML types stay out of the exported API except for
// NewWithInterface (cgo builds only), which takes an nvml.Interface.
//
// # Drivers
//
// New returns ErrNoDriver when libnvidia-ml.so.1 cannot be loaded, so the
// agent can carry on with its other collectors. NVML functions newer than
// the oldest supported driver are looked up with Extensions().LookupSymbol
// before they are called: calling a symbol the installed driver lacks kills
// the process. ERROR_NOT_SUPPORTED and ERROR_FUNCTION_NOT_FOUND mean "not
// reported" (an empty field or a nil counter), never an error. Any other
// failure on one GPU or one link becomes a discovery.ItemError naming it
// ("GPU 3 NVLink 7") and the rest of the node is still reported.
//
// # Tests
//
// The tests (cgo builds only) drive the collector through go-nvml's
// moq-generated mocks (github.com/NVIDIA/go-nvml/pkg/nvml/mock: mock.Interface,
// mock.Device, mock.ExtendedInterface). A mock method whose ...Func field is
// nil panics, and the go-nvml DGX mock servers simulate no NVLink, field
// values, topology or fabric info, so the test fixture fills every function
// the collector calls from a simulated node (internal/discovery/sim profiles
// dgx-h100, dgx-a100, hgx-b200, gb200-nvl72, rtx3090-nvlink-pair): GPUs, NVLink
// wiring to NVSwitches, versions, field values. Individual tests then replace
// single functions to inject errors or unsupported calls. The versioned
// "handler" APIs (GetGpuFabricInfoV, GetTemperatureV) hold a real device
// handle and cannot be mocked; the collector uses them only with the real
// library (New) and otherwise falls back to the plain, mockable calls.
package nvml
