package sink

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// This file derives what needs every shard read (totals, duplicates) and
// combines the reports of several directories into one.

// finish derives the totals and the problems that need every shard read.
func (r *Report) finish() {
	r.Distinct = int64(len(r.keys))
	r.Errors.Keys = len(r.failed)
	r.Errors.Open = 0
	r.Errors.ByCause = map[string]int{}
	for k, cause := range r.failed {
		if !r.Has(k) {
			r.Errors.Open++
			if cause == "" {
				cause = "unknown"
			}
			r.Errors.ByCause[cause]++
		}
	}
	if r.Records > 0 {
		r.TruncatedShare = float64(r.FinishReasons["length"]) / float64(r.Records)
		r.EmptyReasoningShare = float64(r.EmptyReasoning) / float64(r.Records)
		r.ThinkTagsShare = float64(r.ThinkTags) / float64(r.Records)
		if 2*r.EmptyReasoning > r.Records && 2*r.ThinkTags > r.Records {
			r.note("%.0f%% of the records have no reasoning and %.0f%% carry <think> tags in their content: "+
				"the server ran without a reasoning parser, and the reasoning is inside content "+
				"(start vLLM with --reasoning-parser, e.g. deepseek_r1 or qwen3, for the next run)",
				100*r.EmptyReasoningShare, 100*r.ThinkTagsShare)
		}
	}
	r.Duplicates = r.duplicates()
	r.Problems = append(r.Problems, groupDuplicates(r.Duplicates)...)
}

// duplicates lists every key held by more than one file, in key order.
func (r *Report) duplicates() []Duplicate {
	out := []Duplicate{}
	for fp, dk := range r.extra {
		d := Duplicate{ID: dk.key.ID, Sample: dk.key.Sample, Files: []string{r.files[r.keys[fp]]}}
		for _, fi := range dk.more {
			d.Files = append(d.Files, r.files[fi])
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Duplicate) int {
		return compareKeys(Key{a.ID, a.Sample}, Key{b.ID, b.Sample})
	})
	return out
}

// groupDuplicates makes one problem per set of files sharing keys: a shard
// copied whole is one line, not a thousand.
func groupDuplicates(dups []Duplicate) []string {
	type group struct {
		files []string
		first Duplicate
		n     int
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range dups {
		files := slices.Clone(d.Files)
		slices.Sort(files)
		id := strings.Join(files, "\x00")
		g := groups[id]
		if g == nil {
			g = &group{files: files, first: d}
			groups[id] = g
			order = append(order, id)
		}
		g.n++
	}
	var out []string
	for _, id := range order {
		g := groups[id]
		where := "in " + strings.Join(g.files, " and ")
		if len(g.files) == 2 && g.files[0] == g.files[1] {
			where = "twice in " + g.files[0]
		}
		if g.n == 1 {
			out = append(out, fmt.Sprintf("duplicate key id=%q sample=%d %s: keep one copy, delete the other (a JSONL line, or the row from a Parquet shard)",
				g.first.ID, g.first.Sample, where))
			continue
		}
		out = append(out, fmt.Sprintf("%d duplicate keys %s (first id=%q sample=%d): keep one copy of each; when a whole shard was copied, move the copy away",
			g.n, where, g.first.ID, g.first.Sample))
	}
	return out
}

// ErrIdentityDiffers is returned by Combine when the directories were made
// with different answer settings: they are not one dataset.
var ErrIdentityDiffers = errors.New("directories were made with different settings")

// Combine reads several reports (one per --shard i/n directory) as one
// dataset: counts and tokens add up, and a key in two directories is a
// duplicate like a key in two shards. Per-directory problems stay in their
// reports; the combined report's Problems are the keys duplicated across
// directories, its Manifest the first directory's (they share the identity)
// and its Shards empty. Directories whose manifests have different identity hashes
// are refused with ErrIdentityDiffers.
func Combine(reports ...*Report) (*Report, error) {
	c := newReport("")
	hash := ""
	for _, r := range reports {
		c.Dirs = append(c.Dirs, r.Dir)
		if r.Manifest != nil {
			if hash != "" && r.Manifest.JobHash != hash {
				return nil, fmt.Errorf("combine %s: %w (identity %.12s vs %.12s): inspect them one by one",
					strings.Join(c.Dirs, ", "), ErrIdentityDiffers, hash, r.Manifest.JobHash)
			}
			hash = r.Manifest.JobHash
			if c.Manifest == nil {
				c.Manifest = r.Manifest
			}
		}
		off := int32(len(c.files))
		c.files = append(c.files, r.files...)
		c.readAs = append(c.readAs, r.readAs...)
		for fp, fi := range r.keys {
			// A key duplicated inside r comes with its name; one held
			// once there has none, and nameDuplicates finds it if
			// another directory holds it too.
			var k *Key
			d := r.extra[fp]
			if d != nil {
				k = &d.key
			}
			c.addKey(fp, k, fi+off)
			if d != nil {
				for _, more := range d.more {
					c.addKey(fp, k, more+off)
				}
			}
		}
		for k, cause := range r.failed {
			c.failed[k] = cause
		}
		c.Records += r.Records
		c.PromptTokens += r.PromptTokens
		c.CompletionTokens += r.CompletionTokens
		c.EmptyReasoning += r.EmptyReasoning
		c.ThinkTags += r.ThinkTags
		for f, n := range r.FinishReasons {
			c.FinishReasons[f] += n
		}
		c.Errors.Records += r.Errors.Records
	}
	if err := c.nameDuplicates(); err != nil {
		return nil, fmt.Errorf("combine %s: %w", strings.Join(c.Dirs, ", "), err)
	}
	c.finish()
	// Duplicates inside one directory are that directory's problems
	// already; here only the ones spanning directories are new.
	c.Problems = c.Problems[:0]
	var across []Duplicate
	for _, d := range c.Duplicates {
		dirs := map[string]bool{}
		for _, f := range d.Files {
			dirs[dirOfData(f)] = true
		}
		if len(dirs) > 1 {
			across = append(across, d)
		}
	}
	c.Problems = append(c.Problems, groupDuplicates(across)...)
	return c, nil
}

// dirOfData is the output directory of a data file path (DIR/data/NAME).
func dirOfData(path string) string { return filepath.Dir(filepath.Dir(path)) }

// errNamed stops a key scan once every fingerprint sought in a file has
// its key.
var errNamed = errors.New("every key sought is named")

// nameDuplicates finds the keys of the duplicates Combine indexed by
// fingerprint alone (a key held once in each of two directories): it reads
// the keys of only the files those fingerprints point to, until each has
// its key. Duplicates are rare, and a problem to report when there are
// any, so the index keeps no key for the others.
func (r *Report) nameDuplicates() error {
	sought := map[int32][]fingerprint{} // file -> fingerprints it holds, unnamed
	for fp, d := range r.extra {
		if d.named {
			continue
		}
		sought[r.keys[fp]] = append(sought[r.keys[fp]], fp)
		for _, fi := range d.more {
			sought[fi] = append(sought[fi], fp)
		}
	}
	if len(sought) == 0 {
		return nil
	}
	var errs []error
	for _, fi := range slices.Sorted(maps.Keys(sought)) {
		left := map[fingerprint]bool{}
		for _, fp := range sought[fi] {
			if !r.extra[fp].named {
				left[fp] = true
			}
		}
		if len(left) == 0 {
			continue // named from an earlier file
		}
		_, err := formats[r.readAs[fi]].keys(r.files[fi], func(k Key, _ int) error {
			fp := fingerprintOf(k)
			if left[fp] {
				d := r.extra[fp]
				d.key, d.named = k, true
				delete(left, fp)
				if len(left) == 0 {
					return errNamed
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errNamed) {
			// A temporary file may have moved on or grown a torn
			// tail since it was read: another file of the key may
			// still name it.
			errs = append(errs, err)
		}
	}
	for fp, d := range r.extra {
		if !d.named {
			files := []string{r.files[r.keys[fp]]}
			for _, fi := range d.more {
				files = append(files, r.files[fi])
			}
			why := errors.New("no key of theirs has its fingerprint")
			if len(errs) > 0 {
				why = errors.Join(errs...)
			}
			return fmt.Errorf("a key held in %s no longer reads from them (%w): a run changed them while they were read; inspect again when it has ended",
				strings.Join(files, " and "), why)
		}
	}
	return nil
}
