package pool

// Placement by prefix. vLLM's automatic prefix caching (and SGLang's radix
// cache) keeps one cache per replica: a prompt whose leading messages (a
// system prompt, few-shot turns, a conversation's earlier turns, the same
// prompt's other samples) one replica computed costs that replica only the
// rest, and every other replica all of it. So, with several endpoints, a
// request goes to the replica that was last sent its longest run of leading
// messages, unless that replica holds more than a bound above the one the
// load alone would choose; then the load wins, and that replica holds the
// prefix too (as SGLang's cache-aware router and llm-d's scorers balance hit
// rate against queue). placer is the one type that decides which replica;
// router.pick asks it after choosing by load, and the retry loop (slot.go)
// knows only that a request carries its prefix chain.

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
	"github.com/synthgen/synthgen/chat"
)

// prefixChain is a request's leading messages hashed as a chain: hash[i]
// is the hash of its messages 0..i, size[i] their bytes (roles and texts).
// A request with a longer prefix in common with another shares its first
// entries.
type prefixChain struct {
	hash []uint64
	size []int
}

// chainOf hashes msgs into their prefix chain. Roles, texts, tool calls and
// tool call ids are each followed by a separator no text holds, so no two
// different message lists hash alike by shifting text between fields.
func chainOf(msgs []chat.Message) prefixChain {
	out := prefixChain{hash: make([]uint64, len(msgs)), size: make([]int, len(msgs))}
	var d xxhash.Digest
	var prev [8]byte
	n := 0
	for i, m := range msgs {
		d.Reset()
		_, _ = d.Write(prev[:])
		field := func(s string) {
			_, _ = d.WriteString(s)
			_, _ = d.Write([]byte{0})
		}
		field(m.Role)
		field(m.Content)
		field(m.ToolCallID)
		for _, c := range m.ToolCalls {
			field(c.ID)
			field(c.Function.Name)
			field(c.Function.Arguments)
		}
		out.hash[i] = d.Sum64()
		binary.LittleEndian.PutUint64(prev[:], out.hash[i])
		n += len(m.Role) + len(m.Content)
		out.size[i] = n
	}
	return out
}

const (
	// placeSlack and placeRatio are the bound: the replica holding the
	// prefix is passed over when it has more than placeSlack requests in
	// flight above the one the load chose, more than placeRatio times its
	// count (SGLang's balance_abs_threshold and balance_rel_threshold,
	// scaled to a client's concurrency), and the load's choice starves:
	// fewer than half its share of the requests in flight. All must hold.
	// Counts in flight move as answers end in bursts, and a spill is paid
	// for good (one more replica computes the prefix): a replica that has
	// half its share still batches, and the prefix stays where it is.
	placeSlack = 4
	placeRatio = 2
	// placeMax bounds the prefixes remembered. Past it the memory starts
	// again: a prefix forgotten costs at most one more computation on
	// each replica.
	placeMax = 1 << 18
)

// placer remembers which replicas were sent each prefix. It is guarded by
// the router's lock.
type placer struct {
	held  map[uint64]uint64 // prefix hash -> a bit per replica (the first 64) that was sent it
	slack int64             // placeSlack, and room for a prompt's other samples
}

// newPlacer returns the placer of a run asking samples answers per prompt.
// The samples of one prompt are sent back to back and are, to vLLM with n,
// one request's work: the bound has room for them on top of placeSlack, so
// that they are not split among replicas that would each compute the
// prompt.
func newPlacer(samples int) *placer {
	return &placer{held: make(map[uint64]uint64), slack: placeSlack + int64(max(samples, 1)-1)}
}

// choose returns the replica for a request whose prefix chain is pre, given
// best, the replica the load chose, and fit, which replicas may take it
// (the same rule that chose best). The longest prefix held by a fitting
// replica within the bound wins, then shorter ones; else best. The choice
// is then remembered as holding every prefix of pre. held is the share of
// pre's bytes the chosen replica was sent before: the client's estimate of
// the prefill its cache saves.
func (p *placer) choose(pre prefixChain, eps []*endpoint, best int, fit func(int, *endpoint) bool) (chosen int, held float64) {
	chosen = best
	for i := len(pre.hash) - 1; i >= 0 && chosen == best; i-- {
		mask := p.held[pre.hash[i]]
		if mask == 0 || mask&bit(best) != 0 {
			if mask != 0 {
				break // the load's choice holds this prefix already
			}
			continue
		}
		owner := -1
		for k, ep := range eps {
			if mask&bit(k) != 0 && fit(k, ep) && (owner < 0 || ep.headroom() > eps[owner].headroom()) {
				owner = k
			}
		}
		if owner >= 0 && p.withinBound(eps, eps[owner], eps[best]) {
			chosen = owner
		}
	}
	for i := len(pre.hash) - 1; i >= 0; i-- {
		if p.held[pre.hash[i]]&bit(chosen) != 0 {
			if total := pre.size[len(pre.size)-1]; total > 0 {
				held = float64(pre.size[i]) / float64(total)
			}
			break
		}
	}
	if len(p.held)+len(pre.hash) > placeMax {
		clear(p.held)
	}
	for _, h := range pre.hash {
		p.held[h] |= bit(chosen)
	}
	return chosen, held
}

// withinBound reports whether owner may take a request the load would have
// sent to least, of eps: see placeSlack.
func (p *placer) withinBound(eps []*endpoint, owner, least *endpoint) bool {
	over := least.headroom() - owner.headroom()
	if over <= p.slack || float64(owner.stats.InFlight()) <= placeRatio*float64(least.stats.InFlight()) {
		return true
	}
	var total int64
	for _, ep := range eps {
		total += ep.stats.InFlight()
	}
	starves := 2*int64(len(eps))*least.stats.InFlight() < total
	return !starves
}

// bit is replica i's bit in a placer's mask; replicas past the 64th are
// never remembered (they are placed by load alone).
func bit(i int) uint64 {
	if i >= 64 {
		return 0
	}
	return 1 << uint(i)
}
