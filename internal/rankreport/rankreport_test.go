package rankreport

import (
	"reflect"
	"strings"
	"testing"
)

func sample() Report {
	return Report{
		CommID: 0x67696e2d6a6f6221, NRanks: 16, NNodes: 8, Rank: 3, LocalRank: 1, GPU: 1, PID: 4242,
		Job: "4242", StartNs: 1_000, EndNs: 2_000, Started: 10, Done: 9, InFlightSinceNs: 1_900, Dropped: 2,
		Colls:    []Coll{{Func: FuncAllReduce, Log2Size: 23, Count: 9, SumNs: 900, MaxNs: 200}},
		Peers:    []Peer{{Peer: 5, Dir: Send, Bytes: 1 << 23, Steps: 36, WaitNs: [3]uint64{1, 2, 3}}, {Peer: 1, Dir: Recv, Bytes: 1 << 23, Steps: 36}},
		Arrivals: []Arrival{{Seq: 8, StartNs: 1_500}},
	}
}

func TestRoundTrip(t *testing.T) {
	b, err := Append(nil, sample())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := sample(); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Report)
		want string
	}{
		{"rank past nranks", func(r *Report) { r.Rank = 16 }, "rank 16 of 16"},
		{"no ranks", func(r *Report) { r.NRanks, r.Rank = 0, 0 }, "nranks 0"},
		{"more nodes than ranks", func(r *Report) { r.NNodes = 17 }, "17 nodes"},
		{"window backwards", func(r *Report) { r.StartNs = 3_000 }, "after its end"},
		{"more done than started", func(r *Report) { r.Done = 11 }, "11 collectives done"},
		{"peer past nranks", func(r *Report) { r.Peers[0].Peer = 99 }, "peer 99"},
		{"peer twice", func(r *Report) { r.Peers[1] = r.Peers[0] }, "twice"},
		{"bytes without steps", func(r *Report) { r.Peers[0].Steps = 0 }, "without steps"},
		{"direction", func(r *Report) { r.Peers[0].Dir = 2 }, "direction 2"},
		{"empty aggregate", func(r *Report) { r.Colls[0].Count = 0 }, "no collectives"},
		{"max over sum", func(r *Report) { r.Colls[0].MaxNs = 901 }, "longest"},
		{"unsampled arrival", func(r *Report) { r.Arrivals[0].Seq = 9 }, "not a multiple"},
		{"control in job", func(r *Report) { r.Job = "a\nb" }, "control character"},
		{"in flight after end", func(r *Report) { r.InFlightSinceNs = 2_001 }, "in flight since"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(&r)
			b, err := Append(nil, r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestDecodeFraming(t *testing.T) {
	good, _ := Append(nil, sample())
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"plan request", append([]byte("GINQ"), good[4:]...), "magic"},
		{"short header", good[:8], "header of 8 bytes"},
		{"version", append(append([]byte{}, good[:4]...), append([]byte{9}, good[5:]...)...), "version 9"},
		{"truncated", good[:len(good)-1], "header says"},
		{"trailing", append(append([]byte{}, good...), 0), "header says"},
		{"huge body", append(append([]byte{}, good[:8]...), 0xff, 0xff, 0xff, 0xff), "at most 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.frame); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLog2(t *testing.T) {
	for n, want := range map[uint64]uint8{0: 0, 1: 0, 2: 1, 3: 1, 8 << 20: 23, 1<<24 - 1: 23} {
		if got := Log2(n); got != want {
			t.Errorf("Log2(%d) = %d, want %d", n, got, want)
		}
	}
}

// FuzzDecode: any bytes decode to a valid report or an error, never a
// panic or an allocation past the body's size; a decoded report encodes
// back to the same bytes.
func FuzzDecode(f *testing.F) {
	good, _ := Append(nil, sample())
	f.Add(good)
	f.Add(good[:HeaderLen])
	empty, _ := Append(nil, Report{NRanks: 1, NNodes: 1})
	f.Add(empty)
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Decode(b)
		if err != nil {
			return
		}
		if err := rep.Validate(); err != nil {
			t.Fatalf("decoded an invalid report: %v", err)
		}
		again, err := Append(nil, rep)
		if err != nil {
			t.Fatal(err)
		}
		// Padding is written as zero; a frame with non-zero padding decodes
		// but does not re-encode to itself.
		if rep2, err := Decode(again); err != nil || !reflect.DeepEqual(rep, rep2) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
