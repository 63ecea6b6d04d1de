package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unsafe"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/shape"
	"github.com/synthgen/synthgen/dataset/template"

	"github.com/synthgen/synthgen/dataset/internal/rawjson"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// Options say which rows to read (the Selection, which a job stores) and
// how to read them (what a bad row does, progress and cancellation, which
// are the run's business and not part of the job).
type Options struct {
	Selection
	// SourceField is the source/category column; empty means "source".
	SourceField string
	// Conversations fills Prompt.Conversation with every turn of a
	// multi-turn row (generation.turns: all).
	Conversations bool
	// Template, when set, makes each row's messages from its own fields
	// (prompt.messages, template.go): the row shape is then rows, whatever
	// its columns, and Format must be auto or rows.
	Template []chat.Message
	// OnBadRow is "skip" (the default: report through OnSkip, count in
	// Skipped) or "fail" (Next returns the *RowError).
	OnBadRow string
	// OnSkip, when set, is called with every skipped bad row.
	OnSkip func(err *RowError)
	// OnIgnored, when set, is told once of each request field that a row
	// sets and synthgen decides for itself (Prompt.Ignored), with the
	// first row that set it.
	OnIgnored func(field, location string)
	// OnDownload, when set, follows the download of an hf:// dataset's
	// files: the file's path in the repository, the bytes on disk and its
	// size, at least once per file downloaded and about every MiB. It is
	// called from the goroutine calling Open, Next or Count.
	OnDownload func(file string, done, total int64)
	// Context, when set, cancels the Hub requests and downloads of an hf://
	// dataset (a Ctrl-C during a long download); nil never cancels. A
	// download cut this way resumes where it was on the next Open.
	Context context.Context
	// Outputs reads a synthgen output directory named by Path (outdir.go):
	// outdir.Reader{} of package dataset/outdir. Nil: such a path is an
	// error that says so.
	Outputs Outputs
	// Remote reads hf:// paths: hub.Remote{} of package dataset/hub, which
	// the programs that read such paths set. It is a field rather than an
	// import so that this package links no HTTP client. Nil: an hf:// path
	// is an error that names it; local paths never use it.
	Remote Remote
	// Known are stamps an earlier Stamp made (a resume's, from its
	// manifest): Stamp takes a file's from there instead of reading it
	// when the file has the path, size, modification time and inode it
	// had then. Empty: every file is read (--rehash).
	Known stamp.Content
}

// Bad-row policies.
const (
	OnBadRowSkip = "skip"
	OnBadRowFail = "fail"
)

// normalize fills defaults and checks the options, naming the bad one.
func (o Options) normalize() (Options, error) {
	switch o.Format {
	case "":
		o.Format = FormatAuto
	case FormatAuto, FormatShareGPT, FormatMessages, FormatPrompt, FormatAlpaca, FormatOpenAIBatch, FormatRows:
	default:
		return o, fmt.Errorf("dataset format %q: want auto, sharegpt, messages, prompt, alpaca, openai-batch or rows", o.Format)
	}
	if err := o.checkTemplate(); err != nil {
		return o, err
	}
	if err := o.checkOutput(); err != nil {
		return o, err
	}
	switch o.OnBadRow {
	case "":
		o.OnBadRow = OnBadRowSkip
	case OnBadRowSkip, OnBadRowFail:
	default:
		return o, fmt.Errorf("dataset on_bad_row %q: want skip or fail", o.OnBadRow)
	}
	if o.SourceField == "" {
		o.SourceField = "source"
	}
	if o.Limit < 0 {
		return o, fmt.Errorf("dataset limit %d: must not be negative", o.Limit)
	}
	if err := o.Shard.check(); err != nil {
		return o, err
	}
	switch o.ShardBy {
	case "", ShardFiles:
	case ShardRows:
		o.ShardBy = ""
	default:
		return o, fmt.Errorf("dataset shard_by %q: want rows or files", o.ShardBy)
	}
	// What is read is the pinned revision of an hf:// dataset.
	o.Path = o.Source()
	return o, nil
}

// Reader yields the prompts of a dataset one row at a time. It holds one
// file open and one row decoded, whatever the dataset's size. A Reader is
// used by one goroutine.
//
// Ids: the physical row index counts every row of every file of the glob in
// sorted path order, bad rows included, so that ids do not move when the
// bad-row policy changes. In JSONL, blank lines are not rows: they are
// passed over and not counted (they still count for line numbers). Split
// by file (Selection.ShardBy), a row's id is its file's name and its
// physical row in the file, "NAME:ROW", and only the shard's files are
// opened.
type Reader struct {
	opts     Options
	conv     shape.Converter
	files    []dsFile
	fetch    fetcher // downloads an hf:// file before it is opened; nil for local files
	nextFile int     // index in files of the next file to open
	cur      source  // nil between files
	curPath  string
	curFile  dsFile
	index    int64 // physical index of the next row (by file: the next row's in its file)
	skipped  int64
	err      error // sticky: io.EOF, a fatal error, or a failed row

	ignoredSaid map[string]bool // the Prompt.Ignored fields OnIgnored heard of

	// The question asked before a row is decoded (SetSkip), and how a
	// row's id is found without decoding it (idsFrom).
	skip    SkipFunc
	skipRaw func(raw []byte) bool
	ids     idSource
	idVals  [][]byte
	idBuf   []byte

	// The question asked after a row is decoded (SetRepeat), and how many
	// repeated ids had their first row looked for (firstRow).
	repeat  RepeatFunc
	located int
}

// SkipFunc is asked about a row of the selection before it is decoded: its
// id (byIndex: the id is the row's index, no field named it) and index.
// True means the row is not needed: Next passes over it without decoding
// it, as it passes over the rows of another shard. It runs on the goroutine
// calling Next. id is valid during the call only: it may share the
// reader's buffer (a resume asks about every row, and a string a row would
// be a million allocations a million rows); a func that keeps it copies it
// (strings.Clone).
type SkipFunc func(id string, index int64, byIndex bool) bool

// idSource is how a row's id is read without decoding the row.
type idSource struct {
	index  bool     // the id is the row index: nothing to read
	fields []string // else these top-level fields of a JSON line
	auto   bool     // fields are custom_id and body: the id is custom_id when both are set (a batch row), else the index
}

func idSourceOf(o Options) idSource {
	switch {
	case o.IDField != "":
		return idSource{fields: []string{o.IDField}}
	case o.Format == FormatOpenAIBatch:
		return idSource{fields: []string{"custom_id"}}
	case o.Format == FormatAuto:
		return idSource{fields: []string{"custom_id", "body"}, auto: true}
	}
	return idSource{index: true}
}

// RepeatFunc is asked about each row of the selection that decoded into a
// prompt: its id and index (byIndex: the id is the row's index, no field
// named it). True means an earlier row of this pass had the id: the row is
// a bad row (a *RepeatedIDError), reported and counted as any other, so
// that each id is asked once, by its first row. It runs on the goroutine
// calling Next; id is valid during the call only (see SkipFunc).
type RepeatFunc func(id string, index int64, byIndex bool) bool

// SetRepeat installs fn (nil: none): from the next call on, Next asks it
// about every row that decodes. The reader keeps no set of ids itself: the
// caller knows which keys it asked.
func (r *Reader) SetRepeat(fn RepeatFunc) { r.repeat = fn }

// SetSkip installs fn (nil: none): from the next call on, Next asks it
// about each row of the selection whose id it can read without decoding
// the row, and passes over the rows it says are not needed. A row whose id
// it cannot read that way (a JSON array, a Parquet row with an id column,
// a line the quick scan does not understand) is decoded, as without fn.
// Ids and bad-row counts do not change: a row passed over was counted.
func (r *Reader) SetSkip(fn SkipFunc) {
	r.skip = fn
	if fn == nil {
		r.skipRaw = nil
		return
	}
	r.skipRaw = r.skipRow
	r.readIDColumn()
}

// readIDColumn has a Parquet file read its id column alone for skip, when
// there is a skip and an id column (package dataset/internal/parquetid).
func (r *Reader) readIDColumn() {
	if ps, ok := r.cur.(*parquetSource); ok && r.skip != nil && r.opts.IDField != "" {
		ps.readIDs(r.opts.IDField)
	}
}

// skipRow reads the id of the row at r.index from its raw bytes (nil for a
// source without them) and asks r.skip.
func (r *Reader) skipRow(raw []byte) bool {
	if k, ok := r.cur.(keyed); ok {
		return r.skip(k.rowID(), r.index, false)
	}
	if r.ids.index {
		return r.skipByIndex()
	}
	if raw == nil {
		return false
	}
	if r.idVals == nil {
		r.idVals = make([][]byte, len(r.ids.fields))
	}
	if !rawjson.Fields(raw, r.ids.fields, r.idVals) {
		return false
	}
	if r.ids.auto && (rawjson.IsNull(r.idVals[0]) || rawjson.IsNull(r.idVals[1])) {
		return r.skipByIndex() // not a batch row: its id is its index
	}
	id, ok := rawjson.ID(r.idVals[0])
	if !ok {
		return false // the decoder reports what is wrong with it
	}
	return r.skip(id, r.index, false)
}

func (r *Reader) skipByIndex() bool {
	r.idBuf = r.appendIndexID(r.idBuf[:0], r.index)
	return r.skip(unsafe.String(unsafe.SliceData(r.idBuf), len(r.idBuf)), r.rowIndex(), true)
}

// appendIndexID appends the id of the row at index (r.index's count) that
// no field names: its index, or split by file "NAME:ROW".
func (r *Reader) appendIndexID(b []byte, index int64) []byte {
	if r.opts.ByFile() {
		b = append(b, r.curFile.name...)
		b = append(b, ':')
	}
	return strconv.AppendInt(b, index, 10)
}

// rowIndex is the Prompt.Index of the row at r.index: the same, or split
// by file FileRowIndex of its file and row.
func (r *Reader) rowIndex() int64 {
	if r.opts.ByFile() {
		return FileRowIndex(r.curFile.place, r.index)
	}
	return r.index
}

// errSkipped is a source's answer for a row skip said is not needed.
var errSkipped = errors.New("row not needed")

// Open checks the options, finds the files and opens the first one, so that
// a wrong path or an unreadable file is reported before any work starts.
func Open(opts Options) (*Reader, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	files, fetch, err := o.selectFiles()
	if err != nil {
		return nil, err
	}
	r := &Reader{
		ids:   idSourceOf(o),
		opts:  o,
		files: files,
		fetch: fetch,
		conv: shape.Converter{
			Format:      o.Format,
			PromptField: o.PromptField,
			IDField:     o.IDField,
			SourceField: o.SourceField,
			ParamsField: o.ParamsField,
		},
	}
	if r.conv.Template, err = template.Compile(o.Template); err != nil {
		return nil, err
	}
	if o.reading() {
		r.ids = idSource{} // each row's id is its record's key (outputSource)
	}
	if err := r.openNext(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) openNext() error {
	file := r.files[r.nextFile]
	path := file.path
	if r.fetch != nil {
		if err := r.fetch(path); err != nil {
			return err
		}
	}
	var src source
	var err error
	if r.opts.reading() {
		src = openOutputPart(r.opts.Outputs, path, r.opts.Output.Samples)
	} else if src, err = openSource(path); err != nil {
		return err
	}
	r.nextFile++
	r.cur, r.curPath, r.curFile = src, path, file
	if r.opts.ByFile() {
		r.index = 0 // ids and the limit count each file's rows
	}
	r.readIDColumn()
	return nil
}

// ready makes r.cur the file the next row comes from, closing one whose
// limit is reached; false: r.err says why not (io.EOF at the end).
func (r *Reader) ready() bool {
	if r.opts.Limit > 0 && r.index >= r.opts.Limit {
		if !r.opts.ByFile() {
			r.err = io.EOF
			return false
		}
		// Split by file, the limit is each file's: the rest of this
		// one is not read.
		if r.cur != nil {
			err := r.cur.close()
			r.cur = nil
			if err != nil {
				r.err = fmt.Errorf("close %s: %w", r.curPath, err)
				return false
			}
		}
	}
	if r.cur == nil {
		if r.nextFile == len(r.files) {
			r.err = io.EOF
			return false
		}
		if r.err = r.openNext(); r.err != nil {
			return false
		}
	}
	return true
}

// Next returns the next prompt of this shard. It returns io.EOF at the end,
// a *RowError for a bad row when OnBadRow is fail, and an error naming the
// file when a file cannot be read; after an error, Next returns it again.
func (r *Reader) Next() (Prompt, error) {
	for r.err == nil {
		if !r.ready() {
			break
		}
		index, fileRow := r.rowIndex(), r.index
		want := r.opts.ByFile() || r.opts.Shard.Contains(index)
		var skip func([]byte) bool
		if want {
			skip = r.skipRaw
		}
		row, pos, bad, err := r.cur.next(want, skip)
		if err == errSkipped {
			r.index++
			continue
		}
		if err == io.EOF {
			err = r.cur.close()
			r.cur = nil
			if err != nil {
				r.err = fmt.Errorf("close %s: %w", r.curPath, err)
			}
			continue
		}
		if err != nil {
			r.err = err
			break
		}
		r.index++
		if !want {
			continue
		}
		var p Prompt
		if bad == nil {
			bad = r.convert(row, &p)
		}
		if k, ok := r.cur.(keyed); ok {
			p.ID = k.rowID()
		}
		byIndex := p.ID == "" // no id field, and the row names no id of its own
		if byIndex {
			r.idBuf = r.appendIndexID(r.idBuf[:0], fileRow)
			p.ID = string(r.idBuf)
		}
		if bad == nil && r.repeat != nil && r.repeat(p.ID, index, byIndex) {
			bad = fieldErr(r.idFieldOf(byIndex), &RepeatedIDError{ID: p.ID, First: r.firstRow(p.ID, index)})
		}
		if bad != nil {
			re := &RowError{File: r.curPath, Line: pos.line, Row: index, FileRow: pos.fileRow, Field: bad.field, Err: bad.err}
			if r.opts.OnBadRow == OnBadRowFail {
				r.err = re
				break
			}
			r.skipped++
			if r.opts.OnSkip != nil {
				r.opts.OnSkip(re)
			}
			continue
		}
		p.Index = index
		p.Location = location(r.curPath, pos.line, pos.fileRow)
		r.sayIgnored(&p)
		return p, nil
	}
	return Prompt{}, r.err
}

// idFieldOf names the field a row's id came from: the id column, else a
// batch row's custom_id; "" for a row whose id is its index.
func (r *Reader) idFieldOf(byIndex bool) string {
	switch {
	case byIndex:
		return ""
	case r.opts.IDField != "":
		return r.opts.IDField
	}
	return "custom_id"
}

// maxLocated bounds how many repeated ids a reader looks up the first row
// of: each look reads the dataset again up to the repeat (passing over
// every other row before decoding it), which a handful of repeats affords
// and a dataset concatenated to itself does not. Later repeats are named
// without their first row.
const maxLocated = 16

// firstRow is the location of the first row of this reader's selection,
// before index, that has id and decodes into a prompt; "" when it is not
// found or maxLocated lookups were made already.
func (r *Reader) firstRow(id string, index int64) string {
	if r.located >= maxLocated || index == 0 {
		return ""
	}
	r.located++
	o := r.opts
	o.Limit = index // rows before the repeat
	o.OnBadRow, o.OnSkip, o.OnIgnored, o.OnDownload = OnBadRowSkip, nil, nil, nil
	sub := &Reader{ids: r.ids, opts: o, files: r.files, fetch: r.fetch, conv: r.conv}
	defer sub.Close()
	if err := sub.openNext(); err != nil {
		return ""
	}
	sub.SetSkip(func(rid string, _ int64, _ bool) bool { return rid != id })
	for {
		p, err := sub.Next()
		if err != nil {
			return ""
		}
		if p.ID == id {
			return p.Location
		}
	}
}

// sayIgnored tells OnIgnored of each field of p's Ignored it has not heard of.
func (r *Reader) sayIgnored(p *Prompt) {
	for _, f := range p.Ignored {
		if r.opts.OnIgnored == nil || r.ignoredSaid[f] {
			continue
		}
		if r.ignoredSaid == nil {
			r.ignoredSaid = map[string]bool{}
		}
		r.ignoredSaid[f] = true
		r.opts.OnIgnored(f, p.Location)
	}
}

// Skipped is the number of bad rows skipped so far.
func (r *Reader) Skipped() int64 { return r.skipped }

// Close closes the open file. Next returns an error after it.
func (r *Reader) Close() error {
	var err error
	if r.cur != nil {
		err = r.cur.close()
		r.cur = nil
	}
	if r.err == nil {
		r.err = errClosed
	}
	return err
}

var errClosed = errors.New("dataset: reader closed")

// convert fills p with what the row's shape makes of it (its whole
// conversation too, when asked), or returns the field that makes it bad.
func (r *Reader) convert(rw row, p *Prompt) *fieldError {
	var s shape.Row
	if fe := r.conv.Convert(rw, &s); fe != nil {
		return fieldErr(fe.Field, fe.Err)
	}
	p.ID, p.Messages, p.Source, p.Params, p.Ignored, p.Model, p.Tools = s.ID, s.Messages, s.Source, s.Params, s.Ignored, s.Model, s.Tools
	p.Hint = s.Hint
	if r.opts.Conversations {
		p.Hint = r.conv.WholeHint(rw)
		conv, fe := r.conv.Conversation(rw)
		if fe != nil {
			return fieldErr(fe.Field, fe.Err)
		}
		p.Conversation = conv
	}
	return nil
}
