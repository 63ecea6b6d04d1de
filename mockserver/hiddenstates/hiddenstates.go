// Package hiddenstates is a mock of vLLM's hidden-state extraction server
// (the extract_hidden_states speculative method with the example
// hidden-states KV connector): every completion request writes a
// safetensors file of hidden_states [T, layers, hidden] (BF16) and
// token_ids [T] (I64) under a directory, named by an internal request id,
// behind a "<file>.lock" that is locked before the answer leaves, released
// when the file is complete and left on disk, as the connector does. It
// can write wrong token ids and NaN at given rates, and hold a file's lock
// until told, so a client's checks and waits are tested on loopback.
package hiddenstates

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/synthgen/synthgen/internal/safetensors"
)

// Options configures a Server.
type Options struct {
	Dir          string  // the connector's shared_storage_path
	Layers       int     // aux layers captured, default 4
	Hidden       int     // hidden size, default 8
	RateMismatch float64 // share of files whose token_ids differ from the prompt in one place
	RateNaN      float64 // share of files with one NaN in hidden_states
	Seed         uint64
	// Hold, when not nil, is waited on (after the answer is sent, with
	// the lock held) before each file is written: a test closes it to let
	// writes go on, or never does for a lock never released.
	Hold <-chan struct{}
	// Gate, when not nil, is called with the file's sequence number (from
	// 1) before it is written, the lock held: a test blocks in it to stop
	// a client at a known point.
	Gate func(n int64)
}

// Counts are what the server did, for tests to judge by.
type Counts struct {
	Requests, Files, Mismatched, NaN int64
}

// Server answers POST /v1/completions as an extraction server.
type Server struct {
	opts                         Options
	seq                          atomic.Int64
	files, mismatched, nan, reqs atomic.Int64
	mu                           sync.Mutex
	rng                          *rand.Rand
	asked                        map[string]int // files begun, by the ids they are of
	// pending counts files begun and not yet written, under mu; idle is
	// signalled when it falls to zero. Not a WaitGroup: requests still
	// arriving from a killed client may begin files while a test waits,
	// which a WaitGroup forbids (Add from zero during Wait panics).
	pending int
	idle    *sync.Cond
}

// New makes a server writing under opts.Dir (which must exist).
func New(opts Options) *Server {
	if opts.Layers <= 0 {
		opts.Layers = 4
	}
	if opts.Hidden <= 0 {
		opts.Hidden = 8
	}
	s := &Server{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x4869646465)), asked: map[string]int{}}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// Counts returns a snapshot of the counters.
func (s *Server) Counts() Counts {
	return Counts{Requests: s.reqs.Load(), Files: s.files.Load(), Mismatched: s.mismatched.Load(), NaN: s.nan.Load()}
}

// Asked is how many files were begun for exactly these ids.
func (s *Server) Asked(ids []int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[fmt.Sprint(ids)]
}

// Wait returns once every file begun has been written (or failed),
// including files begun while it waits.
func (s *Server) Wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.pending > 0 {
		s.idle.Wait()
	}
}

func (s *Server) written() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending--; s.pending == 0 {
		s.idle.Broadcast()
	}
}

// Value is the hidden state the server writes for a token at a position,
// layer and dimension, as BF16 bits: a pure function, so a test can check
// that a kept file holds the server's values and not other ones.
func Value(token int64, pos, layer, dim int) uint16 {
	v := float32(1) + float32((token*31+int64(pos)*7+int64(layer)*3+int64(dim))%97)/128
	return uint16(float32bits(v) >> 16)
}

func float32bits(f float32) uint32 { return math.Float32bits(f) }

type request struct {
	Model          string          `json:"model"`
	Prompt         json.RawMessage `json:"prompt"`
	MaxTokens      int             `json:"max_tokens"`
	ReturnTokenIDs bool            `json:"return_token_ids"`
}

// ServeHTTP answers a completion whose prompt is token ids.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	s.reqs.Add(1)
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var ids []int64
	if err := json.Unmarshal(req.Prompt, &ids); err != nil || len(ids) == 0 {
		http.Error(w, "prompt: want a non-empty list of token ids", http.StatusBadRequest)
		return
	}
	path, err := s.Begin(ids)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp := map[string]any{
		"id": fmt.Sprintf("cmpl-%d", s.seq.Load()), "object": "text_completion", "model": req.Model,
		"choices": []map[string]any{{
			"index": 0, "text": "", "finish_reason": "length",
			"prompt_token_ids": ids, "token_ids": []int64{ids[len(ids)-1]},
		}},
		"usage":              map[string]int{"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1},
		"kv_transfer_params": map[string]string{"hidden_states_path": path},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// Begin starts the file for ids as the connector does for any request
// (generation requests too): the lock is created and held before it
// returns, the file is written after (once Hold allows), then the lock is
// released and left on disk. It returns the file's path.
func (s *Server) Begin(ids []int64) (string, error) {
	n := s.seq.Add(1)
	path := filepath.Join(s.opts.Dir, fmt.Sprintf("req-%06d-%04x.safetensors", n, n*2654435761%65536))
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	if err := lockExclusive(lock); err != nil {
		lock.Close()
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	s.mu.Lock()
	s.asked[fmt.Sprint(ids)]++
	mismatch := s.rng.Float64() < s.opts.RateMismatch
	nan := !mismatch && s.rng.Float64() < s.opts.RateNaN
	at := s.rng.IntN(len(ids))
	s.pending++
	s.mu.Unlock()
	go func() {
		defer s.written()
		defer lock.Close() // closing the descriptor releases the flock; the file stays
		if s.opts.Hold != nil {
			<-s.opts.Hold
		}
		if s.opts.Gate != nil {
			s.opts.Gate(n)
		}
		if err := s.write(path, ids, mismatch, nan, at); err == nil {
			s.files.Add(1)
		}
	}()
	return path, nil
}

func (s *Server) write(path string, ids []int64, mismatch, nan bool, at int) error {
	T, L, H := len(ids), s.opts.Layers, s.opts.Hidden
	hs := make([]byte, 2*T*L*H)
	for p := range T {
		for l := range L {
			for d := range H {
				binary.LittleEndian.PutUint16(hs[2*((p*L+l)*H+d):], Value(ids[p], p, l, d))
			}
		}
	}
	tok := append([]int64(nil), ids...)
	if mismatch {
		tok[at]++
		s.mismatched.Add(1)
	}
	if nan {
		binary.LittleEndian.PutUint16(hs[2*at*L*H:], 0x7fc0)
		s.nan.Add(1)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = safetensors.Write(f, []safetensors.Data{
		{Name: "hidden_states", DType: safetensors.BF16, Shape: []int64{int64(T), int64(L), int64(H)}, Bytes: hs},
		{Name: "token_ids", DType: safetensors.I64, Shape: []int64{int64(T)}, Bytes: safetensors.Int64Bytes(tok)},
	}, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Chat wraps a chat-completions handler so that every request leaves the
// file of its prompt, as the connector does for a generation request (a
// client must clean up what it did not ask for); ids tokenizes the
// messages' contents as the chat handler does.
func (s *Server) Chat(chat http.Handler, ids func(contents ...string) []int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) == nil {
			var contents []string
			for _, m := range req.Messages {
				var c string
				if json.Unmarshal(m.Content, &c) == nil {
					contents = append(contents, c)
				}
			}
			var ids64 []int64
			for _, v := range ids(contents...) {
				ids64 = append(ids64, int64(v))
			}
			if len(ids64) > 0 {
				_, _ = s.Begin(ids64)
			}
		}
		chat.ServeHTTP(w, r)
	})
}
