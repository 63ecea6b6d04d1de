// Package hidden is the hidden-state pass: for every record with token ids
// it asks an extraction server (vLLM's extract_hidden_states method with a
// hidden-states KV connector) for a prefill of the record's prompt + answer
// ids, waits on the lock of the safetensors file the server writes, checks
// the file (its token ids are the ids sent, its shape is [T, layers,
// hidden], every value is finite), moves it into the output directory
// under a name keyed by the record, and only then marks the record's
// states kept in a durable log. A kill at any moment leaves no
// half-written kept file and never extracts a kept record again.
package hidden

import (
	"fmt"
	"net/http"
	"time"

	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// DirName is the output directory's folder of kept hidden-state files
// (DIR/hidden/...), spelled once in sink/layout.
const DirName = layout.HiddenName

// Config is what the pass needs to know of the extraction server.
type Config struct {
	// BaseURL is the extraction endpoint's root, ending in /v1.
	BaseURL string
	APIKey  string
	Model   string
	// Dir is the server's shared_storage_path as this machine sees it:
	// the path in an answer is the server's, and may be mounted elsewhere
	// here, so only its base name is taken and looked for under Dir.
	Dir string
	// Layers and HiddenSize are the shape every file must have past its
	// token axis: [T, Layers, HiddenSize].
	Layers, HiddenSize int
	// LockWait bounds the wait for a file's lock to be released (a server
	// that died mid-write never releases it); 0: 10 minutes.
	LockWait time.Duration
	// Attempts is how many times a unit is asked before its failure is
	// final (a mismatch, a non-finite value, an HTTP error); 0: 3.
	Attempts int
	// Backoff is the wait between attempts; zero: 1s doubling to 30s.
	Backoff backoff.Policy
	// Workers is how many units are extracted at once; 0: 8.
	Workers int
	HTTP    *http.Client
}

func (c Config) withDefaults() Config {
	if c.LockWait <= 0 {
		c.LockWait = 10 * time.Minute
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.Backoff == (backoff.Policy{}) {
		c.Backoff = backoff.Policy{Initial: time.Second, Max: 30 * time.Second}
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.HTTP == nil {
		c.HTTP = http.DefaultClient
	}
	return c
}

// Check names the first bad field of c.
func (c Config) Check() error {
	switch {
	case c.BaseURL == "":
		return fmt.Errorf("hidden_states.base_url: empty")
	case c.Dir == "":
		return fmt.Errorf("hidden_states.dir: empty")
	case c.Layers <= 0:
		return fmt.Errorf("hidden_states.layers: %d, want > 0", c.Layers)
	case c.HiddenSize <= 0:
		return fmt.Errorf("hidden_states.hidden_size: %d, want > 0", c.HiddenSize)
	}
	return nil
}

// Unit is one file's worth of a record: the whole record, or one of its
// turns (whole conversations, tool conversations: one per generation).
type Unit struct {
	Key sink.Key
	// Turn is the index in Record.Turns, -1 for a record of one answer.
	Turn int
	// IDs are the prompt ids then the answer ids, as the server gave them.
	IDs []int64
}

// UnitsOf lists rec's units; none when it has no token ids (a job run
// without generation.return_token_ids).
func UnitsOf(rec *sink.Record) []Unit {
	if len(rec.Turns) == 0 {
		if ids := concat(rec.PromptTokenIDs, rec.TokenIDs); len(ids) > 0 {
			return []Unit{{Key: rec.Key(), Turn: -1, IDs: ids}}
		}
		return nil
	}
	var us []Unit
	for i, t := range rec.Turns {
		if ids := concat(t.PromptTokenIDs, t.TokenIDs); len(ids) > 0 {
			us = append(us, Unit{Key: rec.Key(), Turn: i, IDs: ids})
		}
	}
	return us
}

func concat(a, b []int32) []int64 {
	if len(a) == 0 {
		return nil // no prompt ids: the record was not asked for its tokens
	}
	out := make([]int64, 0, len(a)+len(b))
	for _, v := range a {
		out = append(out, int64(v))
	}
	for _, v := range b {
		out = append(out, int64(v))
	}
	return out
}

// FileName is the unit's kept file name inside DirName
// (layout.HiddenFileName: any id is one safe file name, two keys never
// share one).
func (u Unit) FileName() string { return layout.HiddenFileName(u.Key.ID, u.Key.Sample, u.Turn) }

// BytesPerToken is what one token's file costs: 2 bytes (BF16) per layer
// per hidden dimension, plus its 8-byte token id.
func BytesPerToken(layers, hidden int) int64 { return 2*int64(layers)*int64(hidden) + 8 }
