package graph

import (
	"slices"
	"sort"
)

// maxNameBlock bounds a nameList block: adding or removing a name copies
// one block (at most this many names) and the block table (one slice
// header per block), not the whole list. At 25,000 nodes: about 100
// blocks of 256 to 512 names.
const maxNameBlock = 512

// nameList is the sorted node names of an immutable graph, in blocks: with
// and without return new lists sharing every block they did not change
// (a sorted slice copied whole per new node was O(nodes) per registration:
// 400 KB at 25,000 nodes; issue #16). Blocks are sorted, non-empty, and
// in order.
type nameList struct {
	blocks [][]string
	n      int
}

// newNameList is the list of sorted (sorted, no duplicates) in blocks of
// half maxNameBlock, so that inserts do not split at once.
func newNameList(sorted []string) nameList {
	l := nameList{n: len(sorted)}
	for len(sorted) > 0 {
		k := min(len(sorted), maxNameBlock/2)
		l.blocks = append(l.blocks, slices.Clip(sorted[:k]))
		sorted = sorted[k:]
	}
	return l
}

func (l nameList) len() int { return l.n }

// all is every name in order, in a new slice.
func (l nameList) all() []string {
	out := make([]string, 0, l.n)
	for _, b := range l.blocks {
		out = append(out, b...)
	}
	return out
}

// block is the index of the block name belongs in: the first whose last
// name is not before it, else the last block.
func (l nameList) block(name string) int {
	i := sort.Search(len(l.blocks), func(i int) bool {
		b := l.blocks[i]
		return b[len(b)-1] >= name
	})
	return min(i, len(l.blocks)-1)
}

// with is the list with name added (l when it is there already).
func (l nameList) with(name string) nameList {
	if len(l.blocks) == 0 {
		return nameList{blocks: [][]string{{name}}, n: 1}
	}
	bi := l.block(name)
	old := l.blocks[bi]
	j, found := slices.BinarySearch(old, name)
	if found {
		return l
	}
	b := make([]string, 0, len(old)+1)
	b = append(append(append(b, old[:j]...), name), old[j:]...)
	var repl [][]string
	if len(b) > maxNameBlock {
		h := len(b) / 2
		repl = [][]string{slices.Clip(b[:h]), b[h:]}
	} else {
		repl = [][]string{b}
	}
	blocks := make([][]string, 0, len(l.blocks)+len(repl)-1)
	blocks = append(append(append(blocks, l.blocks[:bi]...), repl...), l.blocks[bi+1:]...)
	return nameList{blocks: blocks, n: l.n + 1}
}

// without is the list without name (l when it is not there).
func (l nameList) without(name string) nameList {
	if len(l.blocks) == 0 {
		return l
	}
	bi := l.block(name)
	old := l.blocks[bi]
	j, found := slices.BinarySearch(old, name)
	if !found {
		return l
	}
	var repl [][]string
	if len(old) > 1 {
		b := make([]string, 0, len(old)-1)
		repl = [][]string{append(append(b, old[:j]...), old[j+1:]...)}
	}
	blocks := make([][]string, 0, len(l.blocks)+len(repl)-1)
	blocks = append(append(append(blocks, l.blocks[:bi]...), repl...), l.blocks[bi+1:]...)
	return nameList{blocks: blocks, n: l.n - 1}
}
