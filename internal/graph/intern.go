package graph

import "unique"

// istr is an interned string. Most strings a node's structure keeps are
// the same on every node of a system model (PCI bus ids, HCA and port
// names, NVSwitch ids, CPU lists) or shared by many nodes (leaf switch
// GUIDs, MNNVL domains): interned, each distinct value is stored once per
// process (package unique, which frees a value once nothing holds it) and
// a field costs one pointer. The zero istr is "".
type istr struct{ h unique.Handle[string] }

func intern(s string) istr {
	if s == "" {
		return istr{}
	}
	return istr{unique.Make(s)}
}

func (s istr) String() string {
	if s == (istr{}) {
		return ""
	}
	return s.h.Value()
}
