package audit

import "errors"

// Set is the audit of the output directories of one dataset: each on its
// own and, when there are several (one per --shard i/n), all of them read
// as one, where a key in two directories is a duplicate like a key in two
// parts.
type Set struct {
	Dirs []*Audit // one per directory, in the order given
	// Combined is the directories read as one dataset (Combine); nil for
	// one directory, and for several that are not one dataset.
	Combined *Audit
	// NotCombined says why several directories have no Combined: they
	// were made by different jobs (ErrIdentityDiffers), or their files
	// changed while they were read.
	NotCombined error
}

// Dirs audits each directory, then all of them as one dataset. It returns
// an error only when a directory is not an output directory or cannot be
// read at all (Dir's); that several are not one dataset is NotCombined.
func Dirs(dirs ...string) (*Set, error) { return DirsIn("", dirs...) }

// DirsIn is Dirs with the key indexes spilling into tmp (see DirIn).
func DirsIn(tmp string, dirs ...string) (*Set, error) {
	s := &Set{}
	for _, dir := range dirs {
		a, err := DirIn(tmp, dir)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.Dirs = append(s.Dirs, a)
	}
	if len(s.Dirs) > 1 {
		s.Combined, s.NotCombined = Combine(s.Dirs...)
	}
	return s, nil
}

// OK reports whether nothing is invalid, in any directory or in their
// combination. Directories that are not one dataset are not invalid for
// it: each may be fine on its own.
func (s *Set) OK() bool {
	for _, a := range s.Dirs {
		if !a.OK() {
			return false
		}
	}
	return s.Combined == nil || s.Combined.OK()
}

// Dataset is the audit of the whole dataset: the one directory's, or the
// combination of several; nil when several are not one dataset.
func (s *Set) Dataset() *Audit {
	if len(s.Dirs) == 1 {
		return s.Dirs[0]
	}
	return s.Combined
}

// Close removes the directories' key indexes (see Audit.Close).
func (s *Set) Close() error {
	var errs []error
	for _, a := range s.Dirs {
		errs = append(errs, a.Close())
	}
	return errors.Join(errs...)
}
