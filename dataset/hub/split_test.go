package hub

import (
	"reflect"
	"strings"
	"testing"
)

// TestHubDefaultSelection covers the rules that choose files when the path
// names only the dataset (or a folder), on listings shaped like real ones.
func TestHubDefaultSelection(t *testing.T) {
	files := func(paths ...string) []hubFile {
		var out []hubFile
		for _, p := range paths {
			out = append(out, hubFile{Path: p, Size: 1000})
		}
		return out
	}
	perfectblend := files(".gitattributes", "README.md",
		"data/train-00000-of-00006.parquet", "data/train-00001-of-00006.parquet", "data/train-00002-of-00006.parquet",
		"data/train-00003-of-00006.parquet", "data/train-00004-of-00006.parquet", "data/train-00005-of-00006.parquet")
	tests := []struct {
		name  string
		sub   string
		files []hubFile
		want  []string
		err   []string
	}{
		{"open-perfectblend", "", perfectblend, []string{
			"data/train-00000-of-00006.parquet", "data/train-00001-of-00006.parquet", "data/train-00002-of-00006.parquet",
			"data/train-00003-of-00006.parquet", "data/train-00004-of-00006.parquet", "data/train-00005-of-00006.parquet"}, nil},
		{"train and test under data", "", files("data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet", "README.md"),
			[]string{"data/train-00000-of-00001.parquet"}, nil},
		{"split folders", "", files("data/train/0.jsonl", "data/train/1.jsonl", "data/validation/0.jsonl"),
			[]string{"data/train/0.jsonl", "data/train/1.jsonl"}, nil},
		{"root files with splits", "", files("train.jsonl.gz", "test.jsonl.gz", "dataset_infos.json"),
			[]string{"train.jsonl.gz"}, nil},
		{"data/ preferred over the root", "", files("sample.jsonl", "data/all.jsonl"),
			[]string{"data/all.jsonl"}, nil},
		{"no splits: all files", "", files("b.jsonl", "a.jsonl", ".hidden/c.jsonl", "dataset_info.json"),
			[]string{"a.jsonl", "b.jsonl"}, nil},
		{"a folder", "data", files("data/train-0.parquet", "data/test-0.parquet", "other/train.jsonl"),
			[]string{"data/train-0.parquet"}, nil},
		{"a file", "data/test-0.parquet", files("data/train-0.parquet", "data/test-0.parquet"),
			[]string{"data/test-0.parquet"}, nil},
		{"a glob", "data/*-0.parquet", files("data/train-0.parquet", "data/test-0.parquet", "data/x/train-0.parquet"),
			[]string{"data/test-0.parquet", "data/train-0.parquet"}, nil},
		{"split and no split", "", files("train.jsonl", "extra.jsonl"), nil,
			[]string{"cannot choose the files to read", "no split: extra.jsonl", "train: train.jsonl", "e.g. hf://o/n@" + commit1 + "/extra.jsonl or hf://o/n@" + commit1 + "/train.jsonl"}},
		{"two splits, no train", "", files("data/test-0.parquet", "data/test-1.parquet", "data/validation-0.parquet"), nil,
			[]string{"test: data/test-0.parquet", "validation: data/validation-0.parquet", "hf://o/n@" + commit1 + "/data/test-*.parquet"}},
		{"parquet and jsonl", "", files("data/rows.jsonl", "data/rows.parquet"), nil,
			[]string{"json: data/rows.jsonl", "parquet: data/rows.parquet"}},
		{"no data files", "", files("README.md", "blend.py"), nil,
			[]string{"no .parquet, .jsonl or .json files", "README.md (1000 B)", "hf://o/n@refs/convert/parquet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := selectHubFiles(hubRef{repo: "o/n", rev: commit1, path: tt.sub}, tt.files)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("selected %v, want an error", sel)
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range sel {
				got = append(got, f.Path)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
		})
	}
}
