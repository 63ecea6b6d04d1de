package dataset

// The seam for datasets that are not local files: hf://owner/name paths on
// the Hugging Face Hub, read by package dataset/hub. That package holds the
// HTTP client; this one holds only the interface, so that the packages that
// need only the dataset's types (inspect's and export's job, plan and
// manifest) link no HTTP client.

import (
	"context"
	"fmt"
	"strings"
)

// hubScheme starts the paths that Options.Remote reads.
const hubScheme = "hf://"

// isHubPath reports whether a dataset path names a Hub dataset, to be read
// through Options.Remote.
func isHubPath(p string) bool { return strings.HasPrefix(p, hubScheme) }

// Remote reads the datasets named by hf:// paths: it turns such a path into
// local files, fetched when first needed, and names the commit a path
// reads, for pinning. hub.Remote (package dataset/hub) is the one for the
// Hugging Face Hub; a program that reads hf:// paths sets Options.Remote to
// it.
type Remote interface {
	// Resolve returns the local paths of the files path reads, in the
	// order they are read, and fetch, which makes sure one of them is on
	// disk (nil: they all are): Open calls it before it opens a file and
	// Count before it counts one, so that only the files reached are
	// downloaded. ctx (Options.Context, or Background) ends requests and
	// downloads; onDownload, when not nil, follows downloads as
	// Options.OnDownload says. Errors name path.
	Resolve(ctx context.Context, path string, onDownload func(file string, done, total int64)) (files []string, fetch func(file string) error, err error)
	// Identity returns the path pinned to the commit path reads now (see
	// Identity), itself a path that Resolve reads the same files from.
	Identity(ctx context.Context, path string) (string, error)
}

// remote is the Remote of o's hf:// path.
func (o Options) remote() (Remote, context.Context, error) {
	if o.Remote == nil {
		return nil, nil, fmt.Errorf("dataset %s: hf:// paths are read through dataset.Options.Remote, and this program set none (package dataset/hub has one)", o.Path)
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return o.Remote, ctx, nil
}

// Identity names exactly the data that Options.Path reads, so that a run's
// manifest can record it and a resume can tell whether the data moved.
//
// For hf:// paths it resolves the revision (a branch or tag; main when none
// is given) to its commit and returns the pinned path
// "hf://owner/name@<40-hex sha>[/path-or-glob]". That string is itself a valid
// Options.Path that reads the same files in the same order, with no network
// once they are cached: set Options.Path to it before Count and Open so both
// read one commit even if the branch moves meanwhile, and store it so that a
// resume reads what the first run read. When the Hub cannot be reached, the
// commit the revision had when it was last resolved on this machine is used.
//
// Local paths have no revision: Identity returns them unchanged (their
// contents are not hashed).
func Identity(opts Options) (string, error) {
	if !isHubPath(opts.Path) {
		return opts.Path, nil
	}
	r, ctx, err := opts.remote()
	if err != nil {
		return "", err
	}
	return r.Identity(ctx, opts.Path)
}

// fetcher makes sure the file at a path that resolveFiles returned is on
// disk; nil for local datasets.
type fetcher func(path string) error

// resolveFiles turns Options.Path into the files to read in order, and for
// hf:// paths a fetcher that downloads each one when it is first needed:
// Open downloads only the files it reaches, and Count only those it counts
// before Limit.
func resolveFiles(o Options) ([]string, fetcher, error) {
	if o.reading() {
		return outputFiles(o.Path, o.Output), nil, nil
	}
	if !isHubPath(o.Path) {
		files, err := resolve(o.Path)
		return files, nil, err
	}
	r, ctx, err := o.remote()
	if err != nil {
		return nil, nil, err
	}
	return r.Resolve(ctx, o.Path, o.OnDownload)
}
