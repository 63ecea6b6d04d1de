package job

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// FuzzManifestJob: manifest.json is a file on disk that people edit, copy
// and truncate. Whatever its job holds, reading it never panics, and a job
// that reads is written back to the same job (the same hash and no
// difference), since a resume compares exactly that.
func FuzzManifestJob(f *testing.F) {
	for _, p := range []string{
		filepath.Join("..", "cmd", "synthgen", "testdata", "v1dir", "out-jsonl", "manifest.json"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			var m sink.Manifest
			if json.Unmarshal(b, &m) == nil && m.Identity != nil {
				a, _ := json.Marshal(m.Identity.Answer)
				f.Add([]byte(`{}`), a)
			}
		}
	}
	f.Add([]byte(`{"selection":{"path":"x.jsonl","format":"auto","shard":"1/4","content":[{"name":"x.jsonl","size":3,"xxh64":"00"}]},"sampling":{"model":"m","temperature":0,"extra_body":{"seed":9007199254740993,"p":1.0}}}`), []byte(`{}`))
	f.Add([]byte(`{"selection":{"shard":"4/4"}}`), []byte(`{}`))
	f.Add([]byte(`{"sampling":{"n":-3}}`), []byte(`{"generation.max_tokens":"x"}`))
	f.Fuzz(func(t *testing.T, spec, legacy []byte) {
		var answer map[string]string
		_ = json.Unmarshal(legacy, &answer)
		var id *sink.LegacyIdentity
		if answer != nil {
			id = &sink.LegacyIdentity{Answer: answer}
		}
		if len(spec) == 0 || string(spec) == "{}" {
			spec = nil
		}
		j, err := ManifestJob(t.TempDir(), spec, id)
		if err != nil {
			return
		}
		sj, err := j.ManifestEntry("fuzz", nil)
		if err != nil {
			return // an extra_body value JSON cannot write (NaN): Validate refuses it in a config
		}
		back, err := ManifestJob(t.TempDir(), sj.Spec, nil)
		if err != nil {
			t.Fatalf("a job written by sinkJob does not read back: %v\n%s", err, sj.Spec)
		}
		if back.Hash() != j.Hash() || len(back.Diff(j)) != 0 {
			t.Fatalf("job changed through the manifest: %+v\n%s", back.Diff(j), sj.Spec)
		}
	})
}
