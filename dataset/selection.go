package dataset

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/dataset/stamp"
)

// Selection is which rows of which dataset a job reads and how a row is
// read: the part of a job that belongs to the dataset. It is stored in the
// output directory's manifest as typed JSON, so that run, inspect and export
// read the same rows from it; the `key` tags name the setting each field
// comes from, for the job's identity hash and for the message that refuses a
// changed one ("-": not part of the identity; ",part": compared on resume
// but not hashed, see job.Job).
type Selection struct {
	// Path is the dataset as given: a file, a glob (its files are read in
	// sorted path order), or hf://owner/name[@revision][/glob].
	Path string `json:"path" key:"-"`
	// Revision is the commit an hf:// Path was pinned to when the job
	// started (Pin), as a path that reads exactly those files; empty for
	// local files, whose identity is Content.
	Revision string `json:"revision,omitempty" key:"dataset.revision"`
	// Content is what the local files held when the job started (Stamp):
	// the same bytes under another name are the same dataset, other bytes
	// under the same name are not. Empty when the job is split by file
	// (ShardBy): each shard knows only its own files' bytes (ShardContent),
	// and the job's identity is the listing of every file (Files).
	Content stamp.Content `json:"content,omitempty" key:"dataset.content"`
	// ShardBy is how Shard splits the dataset: by row (empty, the
	// default) or by file (ShardFiles).
	ShardBy ShardBy `json:"shard_by,omitempty" key:"dataset.shard_by,zero"`
	// Files, split by file, is every file of a local dataset by name and
	// size (List): what all the shards of the job share, so that they
	// hash alike and combine, without any of them reading another's files.
	Files stamp.Listing `json:"files,omitempty" key:"dataset.files,zero"`
	// ShardContent, split by file, is what this shard's own files held
	// when the job started (Stamp reads only those): compared on resume,
	// no part of the hash.
	ShardContent stamp.Content `json:"shard_content,omitempty" key:"dataset.shard_content,part"`
	// Output is what a synthgen output directory that Path names held when
	// the job started (outdir.go): its records are the rows. Zero for
	// any other dataset.
	Output stamp.Output `json:"output,omitzero" key:"dataset.output,zero"`
	// Format is the row shape: auto (per row), sharegpt, messages, prompt
	// or alpaca. Empty means auto.
	Format string `json:"format" key:"dataset.format"`
	// PromptField is the column of the prompt shape; empty means "prompt".
	PromptField string `json:"prompt_field,omitempty" key:"dataset.prompt_field"`
	// IDField is the id column; empty: the physical row index in decimal.
	IDField string `json:"id_field,omitempty" key:"dataset.id_field"`
	// ParamsField is a column holding an object of the row's own request
	// fields (temperature, max_tokens, seed, ...), which replace the job's
	// for that row, as a batch row's body does; empty: none.
	ParamsField string `json:"params_field,omitempty" key:"dataset.params_field"`
	// Limit, when positive, keeps only the physical rows with index < Limit;
	// split by file, the first Limit rows of each file (so that what is
	// selected does not depend on the split). It is outside the identity:
	// growing it asks only the new rows.
	Limit int64 `json:"limit,omitempty" key:"-"`
	// Shard keeps the rows whose index is Shard.Index mod Shard.Count (by
	// file: the rows of the files whose place in sorted path order is), so
	// that several processes split one dataset.
	Shard Shard `json:"shard" key:"shard,part"`
}

// ShardBy is dataset.shard_by: how --shard i/n splits a dataset.
type ShardBy string

// The values of ShardBy. ShardRows is also the empty value.
const (
	// ShardRows gives shard i the rows whose index is i mod n: every
	// shard reads every file, and an id is the row's index over them all.
	ShardRows ShardBy = "rows"
	// ShardFiles gives shard i the files whose place in sorted path order
	// is i mod n, whole: a shard stamps, counts, downloads and reads only
	// its files. A row's id is then "NAME:ROW", NAME the file's path from
	// the dataset's root (FileNames) and ROW its 0-based row in the file:
	// no shard can know how many rows the files before its own hold
	// without reading them, and these ids are the same however the job is
	// split, a single process included.
	ShardFiles ShardBy = "files"
)

// Identity is the value hashed: empty and "rows" are one job.
func (b ShardBy) Identity() string {
	if b == "" {
		return string(ShardRows)
	}
	return string(b)
}

func (b ShardBy) String() string { return b.Identity() }

// ByFile reports whether the selection splits its dataset by file.
func (s Selection) ByFile() bool { return s.ShardBy == ShardFiles }

// rowBits is how many low bits of a row's index (Prompt.Index), split by
// file, hold its row in the file; the bits above are its file's place in
// the sorted listing. 2^40 rows a file, 2^23 files.
const rowBits = 40

// FileRowIndex is the index (Prompt.Index) of row row of the file at
// place file of the sorted listing, when the dataset is split by file.
func FileRowIndex(file int, row int64) int64 { return int64(file)<<rowBits | row }

// splitIndex is FileRowIndex undone.
func splitIndex(index int64) (file int, row int64) {
	return int(index >> rowBits), index & (1<<rowBits - 1)
}

// Contains reports whether the row at physical index (Prompt.Index) is
// selected: below the limit and in the shard; split by file, its file in
// the shard and its row in the file below the limit. It is the one place
// that rule is written.
func (s Selection) Contains(index int64) bool {
	if s.ByFile() {
		file, row := splitIndex(index)
		return (s.Limit <= 0 || row < s.Limit) && s.TakesFile(file)
	}
	return (s.Limit <= 0 || index < s.Limit) && s.Shard.Contains(index)
}

// TakesFile reports whether the file at place file of the sorted listing
// is the shard's, split by file.
func (s Selection) TakesFile(file int) bool {
	return s.Shard.Whole() || file%s.Shard.Count == s.Shard.Index
}

// Total is how many rows the selection holds of a dataset of rows physical
// rows: Contains counted without reading them. Split by file, rows are the
// shard's own files' rows below the limit, all of them selected.
func (s Selection) Total(rows int64) int64 {
	if s.ByFile() {
		return rows
	}
	if s.Limit > 0 && rows > s.Limit {
		rows = s.Limit
	}
	return s.Shard.of(rows)
}

// Source is the path the rows are read from: the pinned revision of an
// hf:// dataset, else Path.
func (s Selection) Source() string {
	if s.Revision != "" {
		return s.Revision
	}
	return s.Path
}

// Shard is part Index of Count of a dataset: the rows whose index is Index
// modulo Count. The zero value (and Count 1) is the whole dataset.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Whole reports whether the shard is the whole dataset.
func (s Shard) Whole() bool { return s.Count <= 1 }

// Contains reports whether the row at physical index belongs to the shard.
func (s Shard) Contains(index int64) bool {
	return s.Whole() || index%int64(s.Count) == int64(s.Index)
}

// of is how many of the indexes 0..n-1 belong to the shard.
func (s Shard) of(n int64) int64 {
	if s.Whole() {
		return n
	}
	k := int64(s.Count)
	c := n / k
	if n%k > int64(s.Index) {
		c++
	}
	return c
}

// String is "i/n", or "" for the whole dataset.
func (s Shard) String() string {
	if s.Whole() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// MarshalText writes the shard as String does, "all" for the whole dataset,
// so that messages naming a changed shard read "0/2 -> 1/2".
func (s Shard) MarshalText() ([]byte, error) {
	if s.Whole() {
		return []byte("all"), nil
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads what MarshalText writes.
func (s *Shard) UnmarshalText(b []byte) error {
	if string(b) == "all" || len(b) == 0 {
		*s = Shard{}
		return nil
	}
	sh, err := ParseShard(string(b))
	if err != nil {
		return err
	}
	*s = sh
	return nil
}

func (s Shard) check() error {
	if s.Count < 0 || (s.Count <= 1 && s.Index != 0) || (s.Count > 1 && (s.Index < 0 || s.Index >= s.Count)) {
		return fmt.Errorf("dataset shard %d/%d: want 0 <= shard < shards", s.Index, s.Count)
	}
	return nil
}

// ParseShard reads "i/n" (0 <= i < n); "" is the whole dataset.
func ParseShard(text string) (Shard, error) {
	if text == "" {
		return Shard{}, nil
	}
	a, b, ok := strings.Cut(text, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("%q is not i/n with 0 <= i < n (e.g. 0/4)", text)
	}
	if n == 1 {
		return Shard{}, nil
	}
	return Shard{Index: i, Count: n}, nil
}
