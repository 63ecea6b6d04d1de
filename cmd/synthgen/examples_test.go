package main

import (
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/config"
)

// TestExampleConfigsLoad: the configs in examples/ are what people copy; a
// key renamed in config/ must not leave them behind with an error only a
// user would see.
func TestExampleConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v, %d configs", err, len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := config.Load(nil, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
