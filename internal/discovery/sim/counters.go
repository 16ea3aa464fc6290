package sim

import (
	"context"
	"fmt"

	"github.com/gin-topology/gin/internal/discovery"
)

// Counters implements discovery.CounterSource: a simulated node reports
// every NVLink and HCA port with the error counts injected by
// AddNVLinkErrors and AddPortErrors (zero for a healthy node).
func (s *Source) Counters(ctx context.Context) discovery.Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c discovery.Counters
	for _, g := range s.inv.GetGpus() {
		temp := uint32(35 + g.GetIndex())
		c.GPUs = append(c.GPUs, discovery.GPUSample{Index: int(g.GetIndex()), UUID: g.GetUuid(), PCIBusID: g.GetPciBusId(), Model: g.GetModel(), TemperatureC: &temp})
		for _, l := range g.GetNvlinks() {
			k := linkKey{int(g.GetIndex()), int(l.GetIndex())}
			crc, replay, recovery := s.nvlinkErrs[k], uint64(0), uint64(0)
			c.NVLinks = append(c.NVLinks, discovery.NVLinkCounters{
				GPUIndex: int(g.GetIndex()), UUID: g.GetUuid(), PCIBusID: g.GetPciBusId(), Link: int(l.GetIndex()),
				CRCFlit: &crc, Replay: &replay, Recovery: &recovery,
			})
		}
	}
	for _, h := range s.inv.GetHcas() {
		for _, p := range h.GetPorts() {
			m := map[string]uint64{"symbol_error": 0, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0}
			for name, v := range s.portErrs[portKey{h.GetName(), p.GetPort()}] {
				m[name] = v
			}
			c.Ports = append(c.Ports, discovery.PortCounters{Device: h.GetName(), Port: p.GetPort(), Counters: m})
		}
	}
	return c
}

type linkKey struct{ gpu, link int }

type portKey struct {
	hca  string
	port uint32
}

// AddNVLinkErrors adds n CRC errors to a link (to simulate a flaky cable).
func (s *Source) AddNVLinkErrors(gpuIndex, link int, n uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.nvlink(gpuIndex, link); err != nil {
		return err
	}
	if s.nvlinkErrs == nil {
		s.nvlinkErrs = map[linkKey]uint64{}
	}
	s.nvlinkErrs[linkKey{gpuIndex, link}] += n
	return nil
}

// AddPortErrors adds n to a port counter ("symbol_error", ...).
func (s *Source) AddPortErrors(hca string, port uint32, counter string, n uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.inv.GetHcas() {
		for _, p := range h.GetPorts() {
			if h.GetName() == hca && p.GetPort() == port {
				if s.portErrs == nil {
					s.portErrs = map[portKey]map[string]uint64{}
				}
				k := portKey{hca, port}
				if s.portErrs[k] == nil {
					s.portErrs[k] = map[string]uint64{}
				}
				s.portErrs[k][counter] += n
				return nil
			}
		}
	}
	return fmt.Errorf("sim: no HCA port %s/%d", hca, port)
}
