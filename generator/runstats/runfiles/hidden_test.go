package runfiles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddHiddenStates: the block goes in as the report's last key, every
// byte before it kept, and the file stays one JSON object.
func TestAddHiddenStates(t *testing.T) {
	dir := t.TempDir()
	orig := "{\n  \"event\": \"report\",\n  \"exit_code\": 0\n}\n"
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AddHiddenStates(dir, HiddenStatesRecord{Units: 3, Kept: 2, KeptBefore: 1, BytesKept: 1234}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	if !strings.HasPrefix(string(b), "{\n  \"event\": \"report\",\n  \"exit_code\": 0") {
		t.Errorf("the report's bytes changed:\n%s", b)
	}
	var got struct {
		ExitCode int                `json:"exit_code"`
		Hidden   HiddenStatesRecord `json:"hidden_states"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Hidden.BytesKept != 1234 || got.Hidden.Units != 3 {
		t.Fatalf("report %s: %+v, %v", b, got, err)
	}
	if err := AddHiddenStates(dir, HiddenStatesRecord{}); err == nil {
		t.Error("a second block was added")
	}
}
