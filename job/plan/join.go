package plan

// A plan counts a selection's keys against a directory's as a merge of two
// sorted streams, the selection's ids and the keys held, so that it holds
// neither set: a plan of a billion keys costs what a key costs.

import (
	"iter"
	"strings"

	"github.com/synthgen/synthgen/internal/extsort"
	"github.com/synthgen/synthgen/sink"
)

// joiner counts ids given in sink.CompareIDs order against the keys held,
// pulled in the same order.
type joiner struct {
	plan    *Plan
	failed  func(sink.Key) bool
	next    func() (sink.Key, bool)
	stop    func()
	errp    *error
	cur     sink.Key // the held key not yet passed
	have    bool
	last    string // the last id given
	started bool
}

func newJoiner(held Holdings, plan *Plan) *joiner {
	var err error
	seq := iter.Seq[sink.Key](func(yield func(sink.Key) bool) { err = held.EachKey(yield) })
	next, stop := iter.Pull(seq)
	j := &joiner{plan: plan, failed: held.Failed, next: next, stop: stop, errp: &err}
	j.cur, j.have = next()
	return j
}

func (j *joiner) advance() { j.cur, j.have = j.next() }

// add counts the keys (id, 0..samples-1) of a selected row. It returns
// false for an id before the last one given: the ids are not in order, and
// nothing is counted. An id equal to the last is a repeat: a bad row, its
// keys counted once.
func (j *joiner) add(id string) bool {
	pl := j.plan
	if j.started {
		switch c := sink.CompareIDs(id, j.last); {
		case c < 0:
			return false
		case c == 0:
			// A bad row of the run: its keys are its first row's.
			pl.DupIDs++
			pl.BadRows++
			return true
		}
	}
	j.last, j.started = strings.Clone(id), true
	for j.have && sink.CompareIDs(j.cur.ID, id) < 0 {
		j.advance()
	}
	for s := range pl.Samples {
		k := sink.Key{ID: id, Sample: s}
		for j.have && j.cur.ID == id && j.cur.Sample < s {
			j.advance()
		}
		pl.Selected++
		switch {
		case j.have && j.cur == k:
			pl.Done++
			j.advance()
		case j.failed(k):
			pl.Failed++
		default:
			pl.Pending++
		}
	}
	return true
}

// close ends the pull of the held keys; the error is theirs (a sorted run
// that does not read).
func (j *joiner) close() error {
	j.stop()
	return *j.errp
}

// idCodec sorts ids on disk in sink.CompareIDs order.
var idCodec = extsort.Codec[string]{
	Cmp:    sink.CompareIDs,
	Size:   func(id string) int { return 16 + len(id) + 8 },
	Append: func(buf []byte, id string) []byte { return append(buf, id...) },
	Decode: func(b []byte) (string, error) { return string(b), nil },
}
