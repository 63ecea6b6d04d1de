package dataset

import (
	"fmt"
	"strconv"
	"strings"
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
	// under the same name are not.
	Content Content `json:"content,omitempty" key:"dataset.content"`
	// Output is what a synthgen output directory that Path names held when
	// the job started (outdir.go): its records are the rows. Zero for
	// any other dataset.
	Output OutputStamp `json:"output,omitzero" key:"dataset.output,zero"`
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
	// Limit, when positive, keeps only the physical rows with index < Limit.
	// It is outside the identity: growing it asks only the new rows.
	Limit int64 `json:"limit,omitempty" key:"-"`
	// Shard keeps the rows whose index is Shard.Index mod Shard.Count, so
	// that several processes split one dataset.
	Shard Shard `json:"shard" key:"shard,part"`
}

// Contains reports whether the row at physical index is selected: below the
// limit and in the shard. It is the one place that rule is written.
func (s Selection) Contains(index int64) bool {
	return (s.Limit <= 0 || index < s.Limit) && s.Shard.Contains(index)
}

// Total is how many rows the selection holds of a dataset of rows physical
// rows: Contains counted without reading them.
func (s Selection) Total(rows int64) int64 {
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
