package dataset

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/dataset/shape"
)

// RowError is a bad dataset row: one that cannot become a prompt. It names the
// file, the line (JSONL) or row (Parquet, JSON array) and the field, so that a
// person can find and fix it.
type RowError struct {
	// File is the path of the file holding the row, as matched by Options.Path.
	File string
	// Line is the 1-based line for JSONL files, 0 where lines do not apply.
	Line int64
	// Row is the row's physical index across all files (its id when no
	// IDField is set).
	Row int64
	// FileRow is the 0-based row within File; the message uses it when Line is 0.
	FileRow int64
	// Field is the path of the offending field, e.g. "conversations[0].value";
	// empty when the row as a whole is bad (invalid JSON).
	Field string
	// Err says what is wrong.
	Err error
}

// Error formats as "data.jsonl:812: conversations[0].value: not a string", or
// "data.parquet:row 7: conversations: ..." where there are no lines.
func (e *RowError) Error() string {
	loc := e.location()
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", loc, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", loc, e.Field, e.Err)
}

// Unwrap returns Err, so errors.Is matches the reasons below (ErrMissing, ...).
func (e *RowError) Unwrap() error { return e.Err }

func (e *RowError) location() string {
	return location(e.File, e.Line, e.FileRow)
}

// location is "file:line" where lines apply, else "file:row N" (0-based, as
// pandas, pyarrow and DuckDB number rows).
// It is built for every row (Prompt.Location): one allocation, not
// fmt.Sprintf's two or three.
func location(file string, line, fileRow int64) string {
	var n [20]byte
	if line > 0 {
		return file + ":" + string(strconv.AppendInt(n[:0], line, 10))
	}
	return file + ":row " + string(strconv.AppendInt(n[:0], fileRow, 10))
}

// fieldError is a RowError before the reader adds where the row is.
type fieldError struct {
	field string
	err   error
}

func fieldErr(field string, err error) *fieldError { return &fieldError{field: field, err: err} }

// The reasons a field is bad. They are values so tests and callers can match
// them with errors.Is; a row shape's are package shape's.
var (
	ErrMissing        = shape.ErrMissing
	ErrNotString      = shape.ErrNotString
	ErrNotList        = shape.ErrNotList
	ErrNotObject      = shape.ErrNotObject
	ErrEmpty          = shape.ErrEmpty
	ErrNoUserTurn     = shape.ErrNoUserTurn
	ErrUnknownShape   = shape.ErrUnknownShape
	ErrNotText        = shape.ErrNotText
	ErrEndsWithAnswer = shape.ErrEndsWithAnswer
	ErrLineTooLong    = errors.New("line too long")
	// ErrRepeatedID: an earlier row had the row's id (RepeatedIDError).
	ErrRepeatedID = errors.New("repeats the id of an earlier row")
)

// RepeatedIDError is a row whose id an earlier row of the selection had: a
// key is asked once, by its first row, so the repeat is a bad row.
type RepeatedIDError struct {
	ID string
	// First is where the first row with the id is ("file:line"), "" when
	// it was not looked up (after the first few repeats: they cost a read
	// of the dataset each).
	First string
}

func (e *RepeatedIDError) Error() string {
	if e.First == "" {
		return fmt.Sprintf("repeats the id %q of an earlier row (each id is asked once, by its first row; the first %d repeats name it)", e.ID, maxLocated)
	}
	return fmt.Sprintf("repeats the id %q of %s (each id is asked once, by its first row)", e.ID, e.First)
}

// Unwrap returns ErrRepeatedID.
func (e *RepeatedIDError) Unwrap() error { return ErrRepeatedID }
