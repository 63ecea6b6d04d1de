package mockserver

import "testing"

func msgs(texts ...string) []chatMessage {
	out := make([]chatMessage, len(texts))
	for i, t := range texts {
		out[i] = chatMessage{Role: "user", Content: messageContent(t)}
	}
	return out
}

// A prompt that starts with a computed one finds its leading messages
// cached, only those; the LRU forgets the least recently used first.
func TestPrefixCacheCounts(t *testing.T) {
	c := newPrefixCache(3)
	if hit := c.lookup(msgs("a b c", "d e")); hit != 0 {
		t.Fatalf("first prompt hit %d tokens, want 0", hit)
	}
	if hit := c.lookup(msgs("a b c", "f")); hit != 3 {
		t.Fatalf("shared system prompt hit %d tokens, want 3", hit)
	}
	if hit := c.lookup(msgs("a b c", "d e")); hit != 5 {
		t.Fatalf("the same prompt again hit %d tokens, want 5", hit)
	}
	if q, h := c.counts(); q != 14 || h != 8 {
		t.Fatalf("counts %d, %d; want 14 asked, 8 hit", q, h)
	}
	// Three prefixes held: (a b c), (a b c | d e), (a b c | f). Two new
	// ones push out the two least recent, (a b c | f) then (a b c | d e);
	// the system prompt, touched last of all, stays.
	c.lookup(msgs("x"))
	c.lookup(msgs("y"))
	if hit := c.lookup(msgs("a b c", "f")); hit != 3 {
		t.Fatalf("after eviction hit %d tokens, want 3 (the system prompt only)", hit)
	}
}

// The server exports the counts under vLLM's names only with the cache on.
func TestPrefixCacheMetrics(t *testing.T) {
	s := New(Options{PrefixCache: 8})
	s.prefix.lookup(msgs("one two"))
	s.prefix.lookup(msgs("one two"))
	st := s.Stats()
	if st.PrefixQueries != 4 || st.PrefixHits != 2 {
		t.Fatalf("stats %d asked, %d hit; want 4, 2", st.PrefixQueries, st.PrefixHits)
	}
	mf, err := s.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, f := range mf {
		if m := f.GetMetric(); len(m) == 1 && m[0].Counter != nil {
			found[f.GetName()] = m[0].Counter.GetValue()
		}
	}
	if found["vllm:prefix_cache_queries_total"] != 4 || found["vllm:prefix_cache_hits_total"] != 2 {
		t.Fatalf("metrics %v; want queries 4, hits 2", found)
	}
	mf, _ = New(Options{}).registry.Gather()
	for _, f := range mf {
		if f.GetName() == "vllm:prefix_cache_queries_total" {
			t.Fatal("prefix cache metrics exported without a cache")
		}
	}
}
