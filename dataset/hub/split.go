package hub

// Which of a commit's files a path reads: the default selection by split
// and format, folders and globs.

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode"

	"github.com/dustin/go-humanize"

	"github.com/synthgen/synthgen/dataset"
)

// Default selection. Without a path after the name, the files read are:
//  1. the files whose type the reader supports (.parquet, .jsonl, .ndjson,
//     .json, and .gz/.zst of the JSON ones), leaving out hidden paths and the
//     metadata files of the datasets library (dataset_info.json, ...);
//  2. of those, the ones under data/ when there are any (the Hub's layout);
//  3. grouped by split, read from the path as the datasets library does
//     (train, validation/valid/val/dev, test/eval, as a word between - _ . /
//     or digits): one group is taken whole; several are narrowed to train
//     when every file has a split;
//  4. what remains must be all Parquet or all JSON.
//
// Anything else is ambiguous: the error lists what was found and suggests a
// glob. A path naming a folder applies the same rules inside it; a file is
// read alone; a glob (* ? [ ], not crossing /) reads what it matches.

// hubMetadataFiles are JSON files the datasets library writes next to data.
var hubMetadataFiles = map[string]bool{
	"dataset_info.json": true, "dataset_infos.json": true, "dataset_dict.json": true, "state.json": true,
}

var hubSplitWords = map[string]string{
	"train": "train", "training": "train",
	"validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
	"test": "test", "testing": "test", "eval": "test", "evaluation": "test",
}

// splitOf is the split a path names, "" when none.
func splitOf(p string) string {
	p = strings.ToLower(p)
	words := strings.FieldsFunc(p, func(r rune) bool {
		return r == '-' || r == '_' || r == '.' || r == ' ' || r == '/' || unicode.IsDigit(r)
	})
	for _, w := range words {
		if s, ok := hubSplitWords[w]; ok {
			return s
		}
	}
	return ""
}

// selectHubFiles picks the files ref reads among a commit's files, in path
// order.
func selectHubFiles(ref hubRef, files []hubFile) ([]hubFile, error) {
	var sel []hubFile
	switch {
	case ref.path == "":
		var err error
		if sel, err = defaultSelection(ref, "", files); err != nil {
			return nil, err
		}
	case strings.ContainsAny(ref.path, "*?["):
		if _, err := path.Match(ref.path, ""); err != nil {
			return nil, fmt.Errorf("dataset %s: bad glob: %w", ref, err)
		}
		for _, f := range files {
			if ok, _ := path.Match(ref.path, f.Path); ok {
				sel = append(sel, f)
			}
		}
		if len(sel) == 0 {
			return nil, fmt.Errorf("dataset %s: no files match; the dataset has %s", ref, listFiles(files, 20))
		}
	default:
		prefix := ref.path + "/"
		var under []hubFile
		for _, f := range files {
			if f.Path == ref.path {
				sel = []hubFile{f}
				break
			}
			if strings.HasPrefix(f.Path, prefix) {
				under = append(under, f)
			}
		}
		if sel == nil && under == nil {
			return nil, fmt.Errorf("dataset %s: no file or folder %s; the dataset has %s", ref, ref.path, listFiles(files, 20))
		}
		if sel == nil {
			var err error
			if sel, err = defaultSelection(ref, prefix, under); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range sel {
		if _, err := dataset.SupportedFile(f.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
	}
	sort.Slice(sel, func(i, j int) bool { return sel[i].Path < sel[j].Path })
	return sel, nil
}

// defaultSelection applies the rules above to the files under prefix.
func defaultSelection(ref hubRef, prefix string, files []hubFile) ([]hubFile, error) {
	var data []hubFile
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, prefix)
		if strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") || hubMetadataFiles[path.Base(rel)] {
			continue
		}
		if _, err := dataset.SupportedFile(rel); err == nil {
			data = append(data, f)
		}
	}
	if len(data) == 0 {
		hint := ""
		for _, f := range files {
			if strings.HasSuffix(f.Path, ".py") {
				hint = fmt.Sprintf("; it looks like a dataset built by a script: the Hub's Parquet conversion may be at hf://%s@refs/convert/parquet", ref.repo)
				break
			}
		}
		return nil, fmt.Errorf("dataset %s: no .parquet, .jsonl or .json files; found %s%s", ref, listFiles(files, 20), hint)
	}
	var inData []hubFile
	for _, f := range data {
		if strings.HasPrefix(f.Path, prefix+"data/") {
			inData = append(inData, f)
		}
	}
	if len(inData) > 0 {
		data = inData
	}
	groups := map[string][]hubFile{}
	for _, f := range data {
		s := splitOf(strings.TrimPrefix(f.Path, prefix))
		groups[s] = append(groups[s], f)
	}
	sel := data
	if len(groups) > 1 {
		if train, ok := groups["train"]; ok && groups[""] == nil {
			sel = train
		} else {
			return nil, ambiguous(ref, groups, files)
		}
	}
	parquetFiles := 0
	for _, f := range sel {
		if parquet, _ := dataset.SupportedFile(f.Path); parquet {
			parquetFiles++
		}
	}
	if parquetFiles != 0 && parquetFiles != len(sel) {
		byFormat := map[string][]hubFile{}
		for _, f := range sel {
			if parquet, _ := dataset.SupportedFile(f.Path); parquet {
				byFormat["parquet"] = append(byFormat["parquet"], f)
			} else {
				byFormat["json"] = append(byFormat["json"], f)
			}
		}
		return nil, ambiguous(ref, byFormat, files)
	}
	return sel, nil
}

// ambiguous says which groups of files were found and suggests a glob for
// each that reads exactly that group.
func ambiguous(ref hubRef, groups map[string][]hubFile, all []hubFile) error {
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "dataset %s: cannot choose the files to read:", ref)
	var suggestions []string
	for i, k := range names {
		label := k
		if label == "" {
			label = "no split"
		}
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s: %s", label, listFiles(groups[k], 5))
		if g := globFor(groups[k], all); g != "" {
			suggestions = append(suggestions, hubRef{repo: ref.repo, rev: ref.rev, path: g}.String())
		}
	}
	b.WriteString("; set dataset.path to name them")
	if len(suggestions) > 0 {
		b.WriteString(", e.g. " + strings.Join(suggestions, " or "))
	}
	return errors.New(b.String())
}

// globFor is a glob matching exactly group among all (the common folder,
// the common start of the names, then * and the common extension), or "".
func globFor(group, all []hubFile) string {
	if len(group) == 1 {
		return group[0].Path
	}
	dir, prefix, ext := path.Dir(group[0].Path), path.Base(group[0].Path), path.Ext(group[0].Path)
	for _, f := range group[1:] {
		if path.Dir(f.Path) != dir || path.Ext(f.Path) != ext {
			return ""
		}
		base := path.Base(f.Path)
		n := 0
		for n < len(prefix) && n < len(base) && prefix[n] == base[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if strings.ContainsAny(prefix, "*?[\\") {
		return ""
	}
	g := path.Join(dir, prefix+"*"+ext)
	matched := 0
	for _, f := range all {
		if ok, _ := path.Match(g, f.Path); ok {
			matched++
		}
	}
	if matched != len(group) {
		return ""
	}
	return g
}

// listFiles names up to max files with their sizes, for error messages.
func listFiles(files []hubFile, max int) string {
	if len(files) == 0 {
		return "no files"
	}
	var parts []string
	for i, f := range files {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(files)-max))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", f.Path, humanize.IBytes(uint64(f.size()))))
	}
	return strings.Join(parts, ", ")
}
