package keyset

import (
	"math/rand/v2"
	"testing"
)

// TestMarksAgreeWithMap: whichever way a key is held (a bit of a dense
// bitmap, a fingerprint in the packed store or in a small set's tail), the
// first Visit of a held key says it was not visited, every later one that
// it was; a key the set does not hold is never in, never marked.
func TestMarksAgreeWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := mixedKeys(rng, 30000)
	held := map[Key]bool{}
	for _, k := range keys[:20000] {
		held[k] = true
	}
	bulk := NewBulk(1000)
	for k := range held {
		bulk.AddBulk(k)
	}
	if _, dup := bulk.FinishBulk(); dup {
		t.Fatal("FinishBulk reported a duplicate of distinct keys")
	}
	small := &Set{} // a few keys added one at a time: they stay in the tail
	smallHeld := map[Key]bool{}
	for _, k := range keys[:50] {
		small.Add(k)
		smallHeld[k] = true
	}
	small.Compact()
	for _, c := range []struct {
		name string
		set  *Set
		held map[Key]bool
	}{{"bulk", bulk, held}, {"tail", small, smallHeld}, {"empty", &Set{}, nil}, {"nil", nil, nil}} {
		t.Run(c.name, func(t *testing.T) {
			m := c.set.Marks()
			visited := map[Key]bool{}
			// Every key twice, in a shuffled order, and keys never held.
			probes := append(append([]Key{}, keys...), keys...)
			rng.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
			for _, k := range probes {
				in, before := m.Visit(k)
				if in != c.held[k] {
					t.Fatalf("Visit(%v): in %v, want %v", k, in, c.held[k])
				}
				if want := in && visited[k]; before != want {
					t.Fatalf("Visit(%v): before %v, want %v", k, before, want)
				}
				if in {
					visited[k] = true
				}
			}
		})
	}
}
