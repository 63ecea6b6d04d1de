package stamp

import (
	"fmt"
	"strings"
)

// Output is the identity of an output directory read as a dataset:
// the job that made its records and its final parts, which a resume
// compares with the directory as it is then.
type Output struct {
	// JobHash is the directory's job (its manifest's job_hash).
	JobHash string `json:"job_hash"`
	// Samples is the largest generation.n of the jobs that wrote it: above
	// 1 a row's id carries its sample (dataset.KeyID).
	Samples int    `json:"n"`
	Parts   []Part `json:"parts"`
}

// Part is one final part of an Output.
type Part struct {
	Name    string `json:"name"` // under DIR/data
	Records int    `json:"records"`
	Size    int64  `json:"size"`
	XXH64   string `json:"xxh64"`
}

// IsZero reports whether s names no output directory.
func (s Output) IsZero() bool { return s.JobHash == "" && len(s.Parts) == 0 && s.Samples == 0 }

// Identity is what a job's hash covers: the job, n, and each part's name,
// size and hash in order ("" for none).
func (s Output) Identity() string {
	if s.IsZero() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "job %s;n %d", s.JobHash, s.Samples)
	for _, p := range s.Parts {
		fmt.Fprintf(&b, ";%s:%d:%d:%s", p.Name, p.Records, p.Size, p.XXH64)
	}
	return b.String()
}

// Records is the number of records, the rows the directory holds.
func (s Output) Records() int64 {
	var n int64
	for _, p := range s.Parts {
		n += int64(p.Records)
	}
	return n
}

// String is the stamp for a person: "job 1a2b3c4d5e6f, 3 parts, 2400 records".
func (s Output) String() string {
	if s.IsZero() {
		return "(none)"
	}
	return fmt.Sprintf("job %.12s, %d parts, %d records", s.JobHash, len(s.Parts), s.Records())
}

// DescribeChange says what changed from old to s, part by part.
func (s Output) DescribeChange(old any) string {
	o, ok := old.(Output)
	if !ok {
		return ""
	}
	var out []string
	if o.JobHash != s.JobHash {
		out = append(out, fmt.Sprintf("its job %.12s -> %.12s (a forced run of another job wrote into it)", o.JobHash, s.JobHash))
	}
	if o.Samples != s.Samples {
		out = append(out, fmt.Sprintf("its generation.n %d -> %d", o.Samples, s.Samples))
	}
	was := map[string]Part{}
	for _, p := range o.Parts {
		was[p.Name] = p
	}
	for _, p := range s.Parts {
		w, ok := was[p.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("data/%s is new (%d records)", p.Name, p.Records))
		case w != p:
			out = append(out, fmt.Sprintf("data/%s changed (%d records, %d bytes, xxh64 %s; %d, %d, %s when this job started)",
				p.Name, p.Records, p.Size, p.XXH64, w.Records, w.Size, w.XXH64))
		}
		delete(was, p.Name)
	}
	for _, p := range o.Parts {
		if _, gone := was[p.Name]; gone {
			out = append(out, fmt.Sprintf("data/%s is gone (it held %d records)", p.Name, p.Records))
		}
	}
	return strings.Join(out, "; ")
}
