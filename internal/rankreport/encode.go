package rankreport

import (
	"encoding/binary"
	"fmt"
)

// Append encodes rep as one frame after b, as the plugin does (the Go side
// writes frames only in tests and the load generator).
func Append(b []byte, rep Report) ([]byte, error) {
	if len(rep.Job) > MaxJobID || len(rep.Colls) > MaxColls || len(rep.Peers) > MaxPeers || len(rep.Arrivals) > MaxArrivals {
		return b, fmt.Errorf("rankreport: report over its bounds")
	}
	be := binary.BigEndian
	start := len(b)
	b = append(b, Magic...)
	b = append(b, Version, 0, 0, 0, 0, 0, 0, 0)
	b = be.AppendUint64(b, rep.CommID)
	b = be.AppendUint32(b, rep.NRanks)
	b = be.AppendUint32(b, rep.NNodes)
	b = be.AppendUint32(b, rep.Rank)
	b = be.AppendUint32(b, uint32(rep.LocalRank))
	b = be.AppendUint32(b, uint32(rep.GPU))
	b = be.AppendUint32(b, rep.PID)
	b = be.AppendUint16(b, uint16(len(rep.Job)))
	b = append(b, rep.Job...)
	for _, v := range []uint64{rep.StartNs, rep.EndNs, rep.Started, rep.Done, rep.InFlightSinceNs, rep.Dropped} {
		b = be.AppendUint64(b, v)
	}
	b = be.AppendUint16(b, uint16(len(rep.Colls)))
	for _, c := range rep.Colls {
		b = append(b, uint8(c.Func), c.Log2Size, 0, 0)
		b = be.AppendUint32(b, c.Count)
		b = be.AppendUint64(b, c.SumNs)
		b = be.AppendUint64(b, c.MaxNs)
	}
	b = be.AppendUint16(b, uint16(len(rep.Peers)))
	for _, p := range rep.Peers {
		b = be.AppendUint32(b, p.Peer)
		b = append(b, uint8(p.Dir), 0, 0, 0)
		b = be.AppendUint64(b, p.Bytes)
		b = be.AppendUint32(b, p.Steps)
		b = be.AppendUint32(b, 0)
		for _, w := range p.WaitNs {
			b = be.AppendUint64(b, w)
		}
	}
	b = be.AppendUint16(b, uint16(len(rep.Arrivals)))
	for _, a := range rep.Arrivals {
		b = be.AppendUint64(b, a.Seq)
		b = be.AppendUint64(b, a.StartNs)
	}
	n := len(b) - start - HeaderLen
	if n > MaxBody {
		return b[:start], fmt.Errorf("rankreport: body of %d bytes, at most %d", n, MaxBody)
	}
	be.PutUint32(b[start+8:], uint32(n))
	return b, nil
}
