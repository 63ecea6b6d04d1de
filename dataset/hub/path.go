package hub

// The hf:// path grammar: parsing, the canonical form, revisions.

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// hubRef is a parsed hf:// path.
type hubRef struct {
	repo string // "owner/name"
	rev  string // branch, tag or commit; "" means main
	path string // file, folder or glob inside the repo; "" selects by default
}

// String is the canonical hf:// form, which parseHubPath reads back.
func (r hubRef) String() string {
	s := hubScheme + r.repo
	if r.rev != "" {
		if isRefsRevision(r.rev) {
			s += "@" + r.rev
		} else {
			s += "@" + url.PathEscape(r.rev)
		}
	}
	if r.path != "" {
		s += "/" + r.path
	}
	return s
}

// isRefsRevision reports whether rev is one of the Hub's refs/KIND/NAME
// revisions (refs/pr/1, refs/convert/parquet), written with its slashes.
func isRefsRevision(rev string) bool {
	parts := strings.Split(rev, "/")
	return len(parts) == 3 && parts[0] == "refs" && parts[1] != "" && parts[2] != ""
}

func (r hubRef) revision() string {
	if r.rev == "" {
		return defaultRevision
	}
	return r.rev
}

// hubNameRE is what the Hub allows in an owner or a dataset name; it also
// keeps both safe as path elements of the cache.
var hubNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// parseHubPath reads hf://owner/name[@revision][/path]. The "datasets/"
// prefix of huggingface_hub's HfFileSystem URLs (hf://datasets/owner/name) is
// accepted. A revision ends at the next "/", except the Hub's refs/pr/N and
// refs/convert/parquet, which are taken whole; it may also be percent-encoded
// (refs%2Fpr%2F1).
func parseHubPath(p string) (hubRef, error) {
	bad := func(why string) (hubRef, error) {
		return hubRef{}, fmt.Errorf("dataset path %q: %s; want hf://owner/name[@revision][/path or glob]", p, why)
	}
	rest, ok := strings.CutPrefix(p, hubScheme)
	if !ok {
		return bad("not an hf:// path")
	}
	if r, ok := strings.CutPrefix(rest, "datasets/"); ok && strings.Count(r, "/") >= 1 {
		rest = r
	}
	owner, rest, _ := strings.Cut(rest, "/")
	nameRev, sub, _ := strings.Cut(rest, "/")
	name, rev, hasRev := strings.Cut(nameRev, "@")
	if !hubNameRE.MatchString(owner) || !hubNameRE.MatchString(name) {
		return bad("owner and name must be letters, digits, '-', '_' or '.'")
	}
	if hasRev {
		if rev == "refs" {
			parts := strings.SplitN(sub, "/", 3)
			if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
				return bad("revision refs/... needs two more parts, as in refs/pr/1")
			}
			rev = "refs/" + parts[0] + "/" + parts[1]
			sub = ""
			if len(parts) == 3 {
				sub = parts[2]
			}
		} else if u, err := url.PathUnescape(rev); err == nil {
			rev = u
		}
		if rev == "" || rev == "." || strings.Contains(rev, "..") || strings.ContainsFunc(rev, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\'
		}) {
			return bad("empty or malformed revision")
		}
	}
	sub = strings.Trim(sub, "/")
	if sub != "" {
		clean := path.Clean(sub)
		if clean != sub || !filepath.IsLocal(filepath.FromSlash(clean)) || strings.Contains(sub, "\\") {
			return bad("path inside the dataset must be relative, without . or .. parts")
		}
	}
	return hubRef{repo: owner + "/" + name, rev: rev, path: sub}, nil
}

// isCommitSHA reports whether a revision is already a commit id.
func isCommitSHA(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	_, err := hex.DecodeString(rev)
	return err == nil
}
