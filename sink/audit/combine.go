package audit

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
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
// the job) and its Parts empty. Its keys are the directories' sorted
// indexes merged, read while the audits stay open (their Close ends it).
// Directories whose manifests have different job hashes are refused with
// ErrIdentityDiffers.
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
		c.of = append(c.of, a)
		c.files = append(c.files, a.files...)
		c.readAs = append(c.readAs, a.readAs...)
		for k, f := range a.failed {
			c.failed[k] = failure{cause: f.cause}
		}
		c.Records += a.Records
		c.PromptTokens += a.PromptTokens
		c.CompletionTokens += a.CompletionTokens
		c.CachedTokens += a.CachedTokens
		c.Cost += a.Cost
		c.EmptyReasoning += a.EmptyReasoning
		c.ThinkTags += a.ThinkTags
		c.ToolCounts.sum(a.ToolCounts)
		for f, n := range a.FinishReasons {
			c.FinishReasons[f] += n
		}
		c.Errors.Records += a.Errors.Records
	}
	if err := c.finish(); err != nil {
		return nil, fmt.Errorf("combine %s: %w", strings.Join(c.Dirs, ", "), err)
	}
	return c, nil
}

// dirOfData is the output directory of a data file path (DIR/data/NAME).
func dirOfData(path string) string { return filepath.Dir(filepath.Dir(path)) }
