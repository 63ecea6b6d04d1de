package generator

// A dataset whose rows are all bad (another format than dataset.format
// says, a prompt_field that no row has) is a mistake in the config, not a
// job: skipping every row and ending "done 0/0" with exit 0 would hide it.
// So a run stops with an error once the first allBadRows rows read are bad
// with none good before them, or when the dataset ends with every row read
// bad, naming the first bad row's error and what to check.

import (
	"errors"
	"fmt"
	"io"

	"github.com/synthgen/synthgen/dataset"
)

// allBadRows is how many bad rows read from the start, with none good
// among them, stop a run: enough that a dataset with a few broken rows at
// its head runs, few enough that a wrong format is said at once.
const allBadRows = 100

// BadRowsError is a run stopped because the rows it read were all bad.
type BadRowsError struct {
	Rows  int64             // bad rows read
	First *dataset.RowError // the first of them
	All   bool              // the dataset ended: every row read was bad
}

func (e *BadRowsError) Error() string {
	what := fmt.Sprintf("the first %d rows read are all bad, none good (the run stops at %d)", e.Rows, allBadRows)
	if e.All {
		what = fmt.Sprintf("every row read is bad (%d rows), none good", e.Rows)
	}
	first := "unknown"
	if e.First != nil {
		first = e.First.Error()
	}
	// The row's error is quoted, not wrapped: the rows are skipped as
	// dataset.on_bad_row skip asks; it is the config that does not fit.
	return fmt.Sprintf("%s; the first: %s; check that dataset.format, dataset.prompt_field, dataset.id_field and prompt.messages fit the dataset's rows", what, first)
}

// badRowGuard is the dataset as the pool reads it, stopping with a
// *BadRowsError when the rows read are all bad. A row passed over because
// its keys are held (a resume) is a good one: it was answered before.
type badRowGuard struct {
	*dataset.Reader
	first *dataset.RowError // the first bad row (onSkip)
	good  bool              // a row was read that is not bad
}

// onSkip is the reader's OnSkip before the caller's.
func (g *badRowGuard) onSkip(next func(*dataset.RowError)) func(*dataset.RowError) {
	return func(e *dataset.RowError) {
		if g.first == nil {
			g.first = e
		}
		if next != nil {
			next(e)
		}
	}
}

func (g *badRowGuard) SetSkip(fn dataset.SkipFunc) {
	if fn == nil {
		g.Reader.SetSkip(nil)
		return
	}
	g.Reader.SetSkip(func(id string, index int64, byIndex bool) bool {
		skip := fn(id, index, byIndex)
		g.good = g.good || skip
		return skip
	})
}

func (g *badRowGuard) Next() (dataset.Prompt, error) {
	p, err := g.Reader.Next()
	if g.good {
		return p, err
	}
	bad := g.Reader.Skipped()
	switch {
	case err == nil && bad >= allBadRows:
		return dataset.Prompt{}, &BadRowsError{Rows: bad, First: g.first}
	case err == nil:
		g.good = true
	case errors.Is(err, io.EOF) && bad > 0:
		return dataset.Prompt{}, &BadRowsError{Rows: bad, First: g.first, All: true}
	}
	return p, err
}
