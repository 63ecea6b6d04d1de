package audit

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/keyset"
)

// This file combines the audits of several directories into one.

// ErrIdentityDiffers is returned by Combine when the directories were made
// by different jobs (their manifests' job hashes differ): they are not one
// dataset.
var ErrIdentityDiffers = errors.New("directories were made with different settings")

// Combine reads several audits (one per --shard i/n directory) as one
// dataset: counts and tokens add up, and a key in two directories is a
// duplicate like a key in two parts. Per-directory problems stay in their
// audits; the combined audit's Problems are the keys duplicated across
// directories, its Manifest the first directory's that has one (they share
// the job) and its Parts empty. Directories whose manifests have different
// job hashes are refused with ErrIdentityDiffers.
func Combine(audits ...*Audit) (*Audit, error) {
	c := newAudit("")
	hash := ""
	for _, a := range audits {
		c.Dirs = append(c.Dirs, a.Dir)
		if a.Manifest != nil {
			if hash != "" && a.Manifest.JobHash != hash {
				return nil, fmt.Errorf("combine %s: %w (identity %.12s vs %.12s): inspect them one by one",
					strings.Join(c.Dirs, ", "), ErrIdentityDiffers, hash, a.Manifest.JobHash)
			}
			hash = a.Manifest.JobHash
			if c.Manifest == nil {
				c.Manifest = a.Manifest
			}
		}
		off := int32(len(c.files))
		c.files = append(c.files, a.files...)
		c.readAs = append(c.readAs, a.readAs...)
		for fp, fi := range a.keys {
			// A key duplicated inside a comes with its name; one held
			// once there has none, and nameDuplicates finds it if
			// another directory holds it too.
			var k *sink.Key
			d := a.extra[fp]
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
		for k, cause := range a.failed {
			c.failed[k] = cause
		}
		c.Records += a.Records
		c.PromptTokens += a.PromptTokens
		c.CompletionTokens += a.CompletionTokens
		c.EmptyReasoning += a.EmptyReasoning
		c.ThinkTags += a.ThinkTags
		for f, n := range a.FinishReasons {
			c.FinishReasons[f] += n
		}
		c.Errors.Records += a.Errors.Records
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
func (a *Audit) nameDuplicates() error {
	sought := map[int32][]keyset.Fingerprint{} // file -> fingerprints it holds, unnamed
	for fp, d := range a.extra {
		if d.named {
			continue
		}
		sought[a.keys[fp]] = append(sought[a.keys[fp]], fp)
		for _, fi := range d.more {
			sought[fi] = append(sought[fi], fp)
		}
	}
	if len(sought) == 0 {
		return nil
	}
	var errs []error
	for _, fi := range slices.Sorted(maps.Keys(sought)) {
		left := map[keyset.Fingerprint]bool{}
		for _, fp := range sought[fi] {
			if !a.extra[fp].named {
				left[fp] = true
			}
		}
		if len(left) == 0 {
			continue // named from an earlier file
		}
		_, err := sink.ScanKeys(a.files[fi], a.readAs[fi], func(k sink.Key) error {
			fp := keyset.FingerprintOf(k)
			if left[fp] {
				d := a.extra[fp]
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
	for fp, d := range a.extra {
		if !d.named {
			files := []string{a.files[a.keys[fp]]}
			for _, fi := range d.more {
				files = append(files, a.files[fi])
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
