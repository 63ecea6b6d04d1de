package pool

import (
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
)

func placeRouter(n int) *router {
	r := testRouter(n)
	r.place = newPlacer(1)
	return r
}

func chainFor(pairs ...string) prefixChain {
	var msgs []chat.Message
	for i := 0; i+1 < len(pairs); i += 2 {
		msgs = append(msgs, chat.Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return chainOf(msgs)
}

// pickHeld picks for pre and leaves the request in flight.
func pickHeld(r *router, pre prefixChain) int { return r.indexOf(r.pick(nil, pre).ep) }

// Rows under one system prompt go to the replica first sent it while it is
// within the bound; a row under another goes by load.
func TestPlaceSharedSystemPrompt(t *testing.T) {
	r := placeRouter(3)
	first := pickHeld(r, chainFor("system", "S", "user", "q0"))
	for k := range placeSlack {
		if got := pickHeld(r, chainFor("system", "S", "user", "q"+string(rune('a'+k)))); got != first {
			t.Fatalf("row %d under the same system prompt went to %d, want %d (which holds it, %d in flight)", k, got, first, r.eps[first].stats.InFlight())
		}
	}
	other := pickHeld(r, chainFor("system", "T", "user", "q0"))
	if other == first {
		t.Fatalf("a row under another system prompt went to %d, the loaded one", other)
	}
}

// The samples of one prompt, sent back to back, go to one replica: each
// finds the whole prompt held there.
func TestPlaceSamplesOfOnePrompt(t *testing.T) {
	r := placeRouter(3)
	pre := chainFor("user", "write a poem")
	first := pickHeld(r, pre)
	for s := 1; s < 4; s++ {
		if got := pickHeld(r, pre); got != first {
			t.Fatalf("sample %d went to %d, want %d", s, got, first)
		}
	}
}

// A conversation's next turn (its earlier request, the answer, a new user
// message) goes where the earlier turn went, though another replica is
// idler.
func TestPlaceConversationTurns(t *testing.T) {
	r := placeRouter(2)
	turn1 := []chat.Message{{Role: "user", Content: "hi"}}
	at := r.pick(nil, chainOf(turn1))
	setInFlight(r.eps[r.indexOf(at.ep)].stats, 3)
	turn2 := append(turn1, chat.Message{Role: "assistant", Content: "hello"}, chat.Message{Role: "user", Content: "more"})
	if got := pickHeld(r, chainOf(turn2)); got != r.indexOf(at.ep) {
		t.Fatalf("turn 2 went to %d, want %d where turn 1 went", got, r.indexOf(at.ep))
	}
}

// Past the bound the load wins, and the replica it chose holds the prefix
// too: the next row may go to either, whichever has room.
func TestPlaceBoundSpreadsTheLoad(t *testing.T) {
	r := placeRouter(2)
	pre := chainFor("system", "S", "user", "q")
	owner := pickHeld(r, pre)
	idle := 1 - owner
	setInFlight(r.eps[owner].stats, placeSlack+2) // 6 against 0: past both bounds
	if got := pickHeld(r, pre); got != idle {
		t.Fatalf("past the bound the row went to %d, want the idle %d", got, idle)
	}
	// Now both hold it: 6 against 1, the load's choice (the idle one) holds
	// it, and takes it.
	if got := pickHeld(r, chainFor("system", "S", "user", "q2")); got != idle {
		t.Fatalf("with both holding the prefix the row went to %d, want the less loaded %d", got, idle)
	}
	// Within the bound (a few more in flight than the least), the owner
	// keeps a prefix only it holds.
	solo := chainFor("system", "U", "user", "q")
	setInFlight(r.eps[owner].stats, 0)
	setInFlight(r.eps[idle].stats, 0)
	o := pickHeld(r, solo)
	setInFlight(r.eps[o].stats, placeSlack)
	if got := pickHeld(r, chainFor("system", "U", "user", "q3")); got != o {
		t.Fatalf("%d in flight over the least: the row went to %d, want the holder %d", placeSlack, got, o)
	}
}

// A replica that may not take the request (its gate closed, or the prompt
// just failed there) is never chosen for the prefix it holds.
func TestPlaceSkipsUnfitHolder(t *testing.T) {
	r := placeRouter(2)
	pre := chainFor("system", "S", "user", "q")
	owner := pickHeld(r, pre)
	avoid := make(tried, 2)
	avoid[owner] = true
	if got := r.indexOf(r.pick(avoid, pre).ep); got == owner {
		t.Fatalf("the prompt failed on %d and was sent there again for its prefix", owner)
	}
	r2 := placeRouter(2)
	owner = pickHeld(r2, pre)
	closeGate(r2, r2.eps[owner], time.Now())
	if got := pickHeld(r2, pre); got == owner {
		t.Fatalf("sent to %d, whose gate is closed, for its prefix", owner)
	}
}

// Chains share exactly their common leading messages; moving text between
// fields changes the hash.
func TestChainOf(t *testing.T) {
	a := chainFor("system", "S", "user", "x")
	b := chainFor("system", "S", "user", "y")
	if a.hash[0] != b.hash[0] || a.hash[1] == b.hash[1] {
		t.Fatalf("chains %x and %x: want the first equal, the second not", a, b)
	}
	if c, d := chainFor("ab", "c"), chainFor("a", "bc"); c.hash[0] == d.hash[0] {
		t.Fatal("text moved between role and content hashed alike")
	}
}

// A replica with half its share in flight still batches: the holder keeps
// its prefix though it has more than twice as many; one that starves
// (under half its share) takes the row.
func TestPlaceBoundWaitsForStarving(t *testing.T) {
	r := placeRouter(3)
	pre := chainFor("system", "S", "user", "q")
	owner := pickHeld(r, pre)
	a, b := (owner+1)%3, (owner+2)%3
	setInFlight(r.eps[owner].stats, 12)
	setInFlight(r.eps[a].stats, 5)
	setInFlight(r.eps[b].stats, 7)
	if got := pickHeld(r, pre); got != owner {
		t.Fatalf("12, 5, 7 in flight (share 8): the row went to %d, want the holder %d", got, owner)
	}
	setInFlight(r.eps[owner].stats, 12)
	setInFlight(r.eps[a].stats, 3)
	if got := pickHeld(r, pre); got != a {
		t.Fatalf("12, 3, 7 in flight (share 7.3): the row went to %d, want the starving %d", got, a)
	}
}

// Past placeMax prefixes the memory starts again: the next request is
// placed by load, and its prefixes are remembered afresh.
func TestPlaceForgetsPastTheBound(t *testing.T) {
	r := placeRouter(2)
	p := r.place
	for i := range placeMax {
		p.held[uint64(i)+1] = 1
	}
	pre := chainFor("system", "S", "user", "q")
	r.pick(nil, pre)
	if n := len(p.held); n != len(pre.hash) {
		t.Fatalf("%d prefixes remembered after the reset, want the %d of the last request", n, len(pre.hash))
	}
}
