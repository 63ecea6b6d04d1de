package hidden

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzAnswerPath: whatever a server answers, the path the pass reads (and
// may remove) is a .safetensors file directly under hidden_states.dir.
func FuzzAnswerPath(f *testing.F) {
	f.Add([]byte(`{"kv_transfer_params":{"hidden_states_path":"/srv/hs/req-1.safetensors"}}`))
	f.Add([]byte(`{"kv_transfer_params":{"hidden_states_path":"../../etc/passwd"}}`))
	f.Add([]byte(`{"kv_transfer_params":{"hidden_states_path":"/x/.."}}`))
	f.Add([]byte(`{"kv_transfer_params":null}`))
	dir := filepath.Join(f.TempDir(), "hs")
	x := NewExtractor(Config{Dir: dir}, f.TempDir(), nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := x.answerPath(b)
		if err != nil {
			return
		}
		if filepath.Dir(p) != dir || !strings.HasSuffix(p, ".safetensors") {
			t.Fatalf("answer %q reads %q, outside %s", b, p, dir)
		}
	})
}
