package runfiles

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/internal/durable"
)

// HiddenStatesRecord is report.json's hidden_states block: what the
// hidden-state pass (hidden_states.enabled), which runs after the run's
// report is written, did.
type HiddenStatesRecord struct {
	Units          int   `json:"units"`           // records' turns with token ids
	Kept           int   `json:"kept"`            // files kept by this run
	KeptBefore     int   `json:"kept_before"`     // files kept by earlier runs
	Failed         int   `json:"failed"`          // units that failed every attempt (DIR/hidden/failed.jsonl)
	ProjectedBytes int64 `json:"projected_bytes"` // what the units not kept at the start were to take
	BytesKept      int64 `json:"bytes_kept"`      // the kept files' sizes, all runs
}

// AddHiddenStates adds h to dir's report.json as its last key, the bytes
// before it unchanged, and writes the file again atomically.
func AddHiddenStates(dir string, h HiddenStatesRecord) error {
	path := filepath.Join(dir, ReportFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	body := bytes.TrimRight(b, " \n\r\t")
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil || len(body) == 0 || body[len(body)-1] != '}' {
		return fmt.Errorf("report %s: not a JSON object", path)
	}
	if _, ok := probe["hidden_states"]; ok {
		return fmt.Errorf("report %s: already has hidden_states", path)
	}
	block, err := json.MarshalIndent(h, "  ", "  ")
	if err != nil {
		return err
	}
	out := append([]byte{}, body[:len(body)-1]...)
	out = bytes.TrimRight(out, " \n\r\t")
	out = append(out, ",\n  \"hidden_states\": "...)
	out = append(out, block...)
	out = append(out, "\n}\n"...)
	return durable.WriteFile(path, out, 0o644)
}
