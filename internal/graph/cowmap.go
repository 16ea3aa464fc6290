package graph

// Shard counts: replacing one key copies the shard table (one pointer per
// shard) and one shard (~len/shards keys). Sized for 10,000 nodes and
// 80,000 GPUs (about 40 keys per shard).
const (
	nodeShards = 256
	gpuShards  = 2048
)

// cowMap is a copy-on-write string-keyed map: with returns a new map that
// shares every shard it did not touch, so updates of a 10,000-node graph
// copy a few hundred entries instead of all of them.
type cowMap[V any] struct {
	shards []map[string]V
}

func newCowMap[V any](shards int) cowMap[V] {
	return cowMap[V]{shards: make([]map[string]V, shards)}
}

func (m cowMap[V]) shardOf(k string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return int(h % uint32(len(m.shards)))
}

func (m cowMap[V]) get(k string) (V, bool) {
	var zero V
	if len(m.shards) == 0 {
		return zero, false
	}
	s := m.shards[m.shardOf(k)]
	if s == nil {
		return zero, false
	}
	v, ok := s[k]
	return v, ok
}

// setInPlace adds k while the map is still being built (not yet shared).
func (m cowMap[V]) setInPlace(k string, v V) {
	i := m.shardOf(k)
	if m.shards[i] == nil {
		m.shards[i] = map[string]V{}
	}
	m.shards[i][k] = v
}

// with returns a copy of m with dels removed and then sets added.
func (m cowMap[V]) with(sets map[string]V, dels []string) cowMap[V] {
	out := cowMap[V]{shards: append([]map[string]V(nil), m.shards...)}
	if len(out.shards) == 0 { // the zero Graph
		out.shards = make([]map[string]V, nodeShards)
	}
	copied := map[int]bool{}
	touch := func(k string) map[string]V {
		i := out.shardOf(k)
		if !copied[i] {
			n := make(map[string]V, len(out.shards[i])+1)
			for kk, vv := range out.shards[i] {
				n[kk] = vv
			}
			out.shards[i] = n
			copied[i] = true
		}
		return out.shards[i]
	}
	for _, k := range dels {
		delete(touch(k), k)
	}
	for k, v := range sets {
		touch(k)[k] = v
	}
	return out
}
