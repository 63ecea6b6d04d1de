package pool

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/job"
)

// TestNoAnswerFollowsAnAnswer: a row with two assistant turns in a row, read
// from a real file, is asked in either turns mode without a request that
// ends with an assistant turn: turns first asks up to the first answer;
// turns all answers the two once, then the next user turn (before, it
// asked a second answer right after the model's first, and the record held
// three turns). A batch row ending with an assistant turn is a bad row.
func TestNoAnswerFollowsAnAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	rows := `{"messages":[{"role":"user","content":"u1"},{"role":"assistant","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"u2"},{"role":"assistant","content":"c"}]}` + "\n" +
		`{"custom_id":"r","body":{"messages":[{"role":"user","content":"u3"},{"role":"assistant","content":"d"}]}}` + "\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, turns := range []job.Turns{job.TurnsFirst, job.TurnsAll} {
		t.Run(string(turns), func(t *testing.T) {
			var bad []*dataset.RowError
			src, err := dataset.Open(dataset.Options{Selection: dataset.Selection{Path: path}, Conversations: turns == job.TurnsAll,
				OnSkip: func(e *dataset.RowError) { bad = append(bad, e) }})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			c := &talker{}
			opts := wholeOptions()
			opts.Prompt = job.Prompting{Turns: turns}
			stats := runstats.NewStats(nil)
			stats.SetTotal(2)
			eng, err := New(c, stats, opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out := openSink(t, dir)
			if _, err := eng.Run(context.Background(), src, out); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			for _, m := range c.sent {
				if m[len(m)-1].Role == "assistant" {
					t.Errorf("a request ends with an assistant turn: %+v", m)
				}
			}
			u := func(s string) chat.Message { return chat.Message{Role: "user", Content: s} }
			want := [][]chat.Message{{u("u1")}}
			if turns == job.TurnsAll {
				want = append(want, []chat.Message{u("u1"), {Role: "assistant", Content: "answer to u1"}, u("u2")})
			}
			if len(c.sent) != len(want) {
				t.Fatalf("sent %+v, want %+v", c.sent, want)
			}
			for i := range want {
				if len(c.sent[i]) != len(want[i]) {
					t.Fatalf("request %d: %+v, want %+v", i, c.sent[i], want[i])
				}
				for j := range want[i] {
					if !reflect.DeepEqual(c.sent[i][j], want[i][j : j+1][0]) {
						t.Errorf("request %d: %+v, want %+v", i, c.sent[i], want[i])
					}
				}
			}
			r := recordsByID(t, dir)["0"]
			if wantTurns := map[job.Turns]int{job.TurnsFirst: 0, job.TurnsAll: 2}[turns]; len(r.Turns) != wantTurns {
				t.Errorf("record turns %+v, want %d", r.Turns, wantTurns)
			}
			if len(bad) != 1 || bad[0].Field != "body.messages[1].role" || stats.Snapshot().BadRows != 1 {
				t.Errorf("bad rows %v (%d counted), want the batch row ending with an answer", bad, stats.Snapshot().BadRows)
			}
		})
	}
}
