package mockserver

// The prefix cache: vLLM's automatic prefix caching keeps, per replica, the
// KV blocks of prompts it computed, and a new prompt that starts with one of
// them computes only the rest. The mock keeps it per server at message
// granularity (a prompt's leading messages, hashed as a chain): an LRU of
// Options.PrefixCache prefixes, counting the prompt tokens each request
// asked (queries) and those it found computed (hits), as vLLM's
// vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total do. A
// router's worth is then read from the counts: the prefill computed is
// queries - hits.

import (
	"container/list"
	"sync"
)

// prefixCache is one server's LRU of computed prefixes.
type prefixCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List               // front: the most recently used; values are uint64 hashes
	at      map[uint64]*list.Element // hash -> its place in order
	queries int64                    // prompt tokens asked
	hits    int64                    // of those, found computed
}

func newPrefixCache(max int) *prefixCache {
	if max <= 0 {
		return nil
	}
	return &prefixCache{max: max, order: list.New(), at: make(map[uint64]*list.Element)}
}

// lookup counts one prompt: the tokens of its longest cached run of leading
// messages are hits, the rest computed, and every prefix of it is then
// cached (the shorter ones used last, so that they outlive the longer). It
// returns the hit tokens.
func (c *prefixCache) lookup(msgs []chatMessage) int {
	if c == nil {
		return 0
	}
	hashes := make([]uint64, len(msgs))
	tokens := make([]int, len(msgs)) // tokens of msgs[:i+1]
	h, n := uint64(fnvOffset), 0
	for i, m := range msgs {
		h = fnvString(fnvString(h, m.Role), string(m.Content))
		n += countWords(string(m.Content))
		hashes[i], tokens[i] = h, n
	}
	total := max(n, 1) // promptTokens' count
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if _, ok := c.at[hashes[i]]; ok {
			hit = tokens[i]
			break
		}
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		if e, ok := c.at[hashes[i]]; ok {
			c.order.MoveToFront(e)
			continue
		}
		c.at[hashes[i]] = c.order.PushFront(hashes[i])
		if c.order.Len() > c.max {
			old := c.order.Back()
			c.order.Remove(old)
			delete(c.at, old.Value.(uint64))
		}
	}
	c.queries += int64(total)
	c.hits += int64(hit)
	return hit
}

// counts returns the tokens asked and those found computed.
func (c *prefixCache) counts() (queries, hits int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries, c.hits
}
