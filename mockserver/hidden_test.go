package mockserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/safetensors"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// TestHiddenStatesProtocol: with a hidden-states directory the mock answers
// a prefill with the file's path in kv_transfer_params, writes the file of
// exactly the ids sent behind a lock it leaves on disk, and a chat request
// leaves the file of its prompt too, as vLLM's connector does.
func TestHiddenStatesProtocol(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{HiddenStates: hiddenstates.Options{Dir: dir, Layers: 2, Hidden: 3}})
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"mock-model","prompt":[5,6,7],"max_tokens":1,"return_token_ids":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		KV struct {
			Path string `json:"hidden_states_path"`
		} `json:"kv_transfer_params"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || filepath.Dir(ans.KV.Path) != dir {
		t.Fatalf("answer %d %+v, %v", resp.StatusCode, ans, err)
	}
	s.HiddenStates().Wait()
	b, err := os.ReadFile(ans.KV.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := f.Int64s("token_ids", 10)
	if err != nil || len(ids) != 3 || ids[0] != 5 || ids[2] != 7 {
		t.Errorf("token_ids %v, %v", ids, err)
	}
	if hs := f.Tensors["hidden_states"]; hs.DType != safetensors.BF16 || len(hs.Shape) != 3 || hs.Shape[0] != 3 || hs.Shape[1] != 2 || hs.Shape[2] != 3 {
		t.Errorf("hidden_states %+v", hs)
	}
	if _, err := os.Stat(ans.KV.Path + ".lock"); err != nil {
		t.Errorf("lock not left behind: %v", err)
	}
	resp, err = http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"mock-model","messages":[{"role":"user","content":"two words"}],"max_tokens":5}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.HiddenStates().Wait()
	if c := s.HiddenStates().Counts(); c.Files != 2 || c.Requests != 1 {
		t.Errorf("counts %+v, want 2 files (one of the chat request) for 1 extraction request", c)
	}
	if s.HiddenStates().Asked([]int64{5, 6, 7}) != 1 {
		t.Error("the prefill's ids not counted")
	}
}
