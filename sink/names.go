package sink

// Part names and the order of keys.

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// partName is the final file name of part i: part-000007.jsonl.
func partName(i int, format string) string {
	return fmt.Sprintf("part-%06d.%s", i, format)
}

// The suffixes of part file names. A temporary's (Part.Suffix) follows the
// final name it becomes.
const (
	suffixJSONL   = ".jsonl"
	SuffixOpen    = ".open"    // JSONL part or errors part being appended
	SuffixJournal = ".journal" // rows of a converted (Parquet) part being filled
	SuffixTmp     = ".tmp"     // converted part being written
)

// partNamePattern matches a part name of any extension; ParsePart then
// keeps those of a format (the formats register at init, after this is
// compiled).
var partNamePattern = regexp.MustCompile(`^part-(\d{6,})\.([a-z0-9]+)(\.open|\.journal|\.tmp)?$`)

// Part is one file of DIR/data or DIR/errors, by the pieces
// of its name: part-000007.parquet.journal is part 7 of format
// Parquet, being filled.
type Part struct {
	Index  int
	Format string // an output format: FormatJSONL or FormatParquet
	Suffix string // "" (final), SuffixOpen, SuffixJournal or SuffixTmp
}

// ParsePart reads the name of a file of DIR/data or DIR/errors; false for a
// name the sink does not make.
func ParsePart(name string) (Part, bool) {
	m := partNamePattern.FindStringSubmatch(name)
	if m == nil {
		return Part{}, false
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return Part{}, false
	}
	p := Part{Index: i, Format: m[2], Suffix: m[3]}
	f, ok := formats[p.Format]
	if !ok {
		return Part{}, false
	}
	// Only the combinations the sink makes; anything else is not ours.
	converted := !f.lines()
	switch {
	case p.Suffix == SuffixOpen && converted,
		p.Suffix == SuffixJournal && !converted,
		p.Suffix == SuffixTmp && !converted:
		return Part{}, false
	}
	return p, true
}

// Final is the name of the final part p is, or becomes once filled.
func (p Part) Final() string { return partName(p.Index, p.Format) }

// compareKeys orders keys by id (compareIDs), then sample.
func compareKeys(a, b Key) int {
	if c := compareIDs(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Sample, b.Sample)
}

// compareIDs is a total order of ids, so that a sort of many runs merged
// gives the order of one sort (export's, inspect's). Decimal ids (row
// indices) come first, as numbers: "9" before "10". Every other id is
// ordered by its text up to a last ":" that only digits follow, then by
// those digits as a number, and is ordered by its whole text when it ends
// in no such digits: the ids of a dataset sharded by file ("data/a.jsonl:10")
// come file by file in path order, each file's rows in row order, and ids
// without that ending compare as strings. Two spellings of one number
// ("7", "007") are ordered by their text.
func compareIDs(a, b string) int {
	da, db := isDecimal(a), isDecimal(b)
	switch {
	case da && db:
		return compareDecimal(a, b)
	case da:
		return -1
	case db:
		return 1
	}
	pa, na := splitRowID(a)
	pb, nb := splitRowID(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	switch {
	case na == "" && nb == "":
		return 0
	case na == "":
		return -1
	case nb == "":
		return 1
	}
	return compareDecimal(na, nb)
}

// CompareIDs is compareIDs: the order of ids in export and in inspect.
func CompareIDs(a, b string) int { return compareIDs(a, b) }

// splitRowID splits an id at a last ":" that only digits follow: the text
// before it and the digits; the whole id and "" when it has no such end.
func splitRowID(id string) (prefix, row string) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 || !isDecimal(id[i+1:]) {
		return id, ""
	}
	return id[:i], id[i+1:]
}

// compareDecimal compares two decimals as numbers, then as text.
func compareDecimal(a, b string) int {
	ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(ta) != len(tb) {
		return len(ta) - len(tb)
	}
	if c := strings.Compare(ta, tb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
