package inventory

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// ApplyDelta returns the inventory that d makes of base. base is not
// modified. The delta's base_generation must equal base's generation.
func ApplyDelta(base *ginv1.NodeInventory, d *ginv1.InventoryDelta) (*ginv1.NodeInventory, error) {
	if d.GetBaseGeneration() != base.GetGeneration() {
		return nil, fmt.Errorf("delta base generation %d, held generation %d", d.GetBaseGeneration(), base.GetGeneration())
	}
	if d.GetGeneration() <= d.GetBaseGeneration() {
		return nil, fmt.Errorf("delta generation %d is not after its base %d", d.GetGeneration(), d.GetBaseGeneration())
	}
	out := proto.CloneOf(base)
	out.Generation = d.GetGeneration()
	if d.GetCollectedAt() != nil {
		out.CollectedAt = d.GetCollectedAt()
	}
	if d.GetHost() != nil {
		out.Host = d.GetHost()
	}
	if d.GetNvswitches() != nil {
		out.Nvswitches = d.GetNvswitches().GetItems()
	}
	if d.GetPcieBridges() != nil {
		out.PcieBridges = d.GetPcieBridges().GetItems()
	}
	if d.GetQpSummaries() != nil {
		out.QpSummaries = d.GetQpSummaries().GetItems()
	}
	if d.GetFabricNeighbors() != nil {
		out.FabricNeighbors = d.GetFabricNeighbors().GetItems()
	}

	var err error
	if out.Gpus, err = merge(out.GetGpus(), d.GetUpsertGpus(), d.GetRemovedGpuUuids(), (*ginv1.Gpu).GetUuid, "GPU"); err != nil {
		return nil, err
	}
	if out.Hcas, err = merge(out.GetHcas(), d.GetUpsertHcas(), d.GetRemovedHcaNames(), (*ginv1.Hca).GetName, "HCA"); err != nil {
		return nil, err
	}
	return out, nil
}

// merge applies upserts and removals to items keyed by key, keeping the
// base order: replaced items stay where they were, new ones are appended.
func merge[T any](base, upserts []T, removed []string, key func(T) string, what string) ([]T, error) {
	gone := map[string]bool{}
	for _, k := range removed {
		gone[k] = true
	}
	up := map[string]T{}
	for _, u := range upserts {
		up[key(u)] = u
	}
	out := make([]T, 0, len(base)+len(upserts))
	found := map[string]bool{}
	for _, b := range base {
		k := key(b)
		found[k] = true
		switch {
		case gone[k]:
		case has(up, k):
			out = append(out, up[k])
			delete(up, k)
		default:
			out = append(out, b)
		}
	}
	for _, k := range removed {
		if !found[k] {
			return nil, fmt.Errorf("delta removes %s %q, which the held inventory does not have", what, k)
		}
	}
	for _, u := range upserts {
		if _, ok := up[key(u)]; ok {
			out = append(out, u)
			delete(up, key(u))
		}
	}
	return out, nil
}

func has[T any](m map[string]T, k string) bool {
	_, ok := m[k]
	return ok
}

// Diff returns the delta that turns old into cur (cur's generation is used
// as the delta's generation). GPUs are compared by uuid, HCAs by name; other
// sections are included whole when they differ.
func Diff(old, cur *ginv1.NodeInventory) *ginv1.InventoryDelta {
	d := &ginv1.InventoryDelta{BaseGeneration: old.GetGeneration(), Generation: cur.GetGeneration(), CollectedAt: cur.GetCollectedAt()}
	if !proto.Equal(old.GetHost(), cur.GetHost()) {
		d.Host = cur.GetHost()
	}
	if !equalList(old.GetNvswitches(), cur.GetNvswitches()) {
		d.Nvswitches = &ginv1.NvSwitchList{Items: cur.GetNvswitches()}
	}
	if !equalList(old.GetPcieBridges(), cur.GetPcieBridges()) {
		d.PcieBridges = &ginv1.PcieBridgeList{Items: cur.GetPcieBridges()}
	}
	if !equalList(old.GetQpSummaries(), cur.GetQpSummaries()) {
		d.QpSummaries = &ginv1.QpSummaryList{Items: cur.GetQpSummaries()}
	}
	if !equalList(old.GetFabricNeighbors(), cur.GetFabricNeighbors()) {
		d.FabricNeighbors = &ginv1.FabricNeighborList{Items: cur.GetFabricNeighbors()}
	}
	oldGPU := map[string]*ginv1.Gpu{}
	for _, g := range old.GetGpus() {
		oldGPU[g.GetUuid()] = g
	}
	for _, g := range cur.GetGpus() {
		if o, ok := oldGPU[g.GetUuid()]; !ok || !proto.Equal(o, g) {
			d.UpsertGpus = append(d.UpsertGpus, g)
		}
		delete(oldGPU, g.GetUuid())
	}
	for u := range oldGPU {
		d.RemovedGpuUuids = append(d.RemovedGpuUuids, u)
	}
	sort.Strings(d.RemovedGpuUuids)
	oldHCA := map[string]*ginv1.Hca{}
	for _, h := range old.GetHcas() {
		oldHCA[h.GetName()] = h
	}
	for _, h := range cur.GetHcas() {
		if o, ok := oldHCA[h.GetName()]; !ok || !proto.Equal(o, h) {
			d.UpsertHcas = append(d.UpsertHcas, h)
		}
		delete(oldHCA, h.GetName())
	}
	for n := range oldHCA {
		d.RemovedHcaNames = append(d.RemovedHcaNames, n)
	}
	sort.Strings(d.RemovedHcaNames)
	return d
}

func equalList[T proto.Message](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
