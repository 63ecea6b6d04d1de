package hub

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset"
)

// TestHubShardByFileDownloadsItsFiles: split by file, each shard of an
// hf:// dataset downloads only its own file (Count and every row read), and
// its ids name the file by its path under the dataset's root.
func TestHubShardByFileDownloadsItsFiles(t *testing.T) {
	h := newFakeHub(t)
	var all int
	for i := range 2 {
		t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir()) // a cache of its own, as each worker has
		h.reset()
		o := at("hf://acme/blend/data/train-*.parquet")
		o.ShardBy, o.Shard = dataset.ShardFiles, dataset.Shard{Index: i, Count: 2}
		n, err := count(o)
		if err != nil {
			t.Fatal(err)
		}
		ps, bad := readAll(t, o)
		if int64(len(ps)+len(bad)) != n || len(ps) == 0 {
			t.Fatalf("shard %d/2: %d prompts and %d bad rows, Count %d", i, len(ps), len(bad), n)
		}
		want := []string{"train-00000-of-00002.parquet:", "train-00001-of-00002.parquet:"}[i]
		for _, p := range ps {
			if !strings.HasPrefix(p.ID, want) {
				t.Fatalf("shard %d/2: id %s, want ids of %s", i, p.ID, want)
			}
		}
		if _, cdn := h.calls(); len(cdn) != 1 {
			t.Errorf("shard %d/2 downloaded %v, want its one file", i, cdn)
		}
		all += len(ps) + len(bad)
	}
	if whole, _ := count(at("hf://acme/blend/data/train-*.parquet")); int64(all) != whole {
		t.Errorf("the two shards read %d rows, the dataset has %d", all, whole)
	}
}
