package view

// The static report (`synthgen view DIR --html report.html`): the run page
// as one self-contained file, for a run under nohup on a GPU box that the
// reader copies to a laptop. The plots, the summary, the job and a sample
// of records of each finish reason are in the file: uPlot and view.js
// inline, the data as a JSON block the script reads, the records rendered
// by html/template. A Content-Security-Policy in the page allows only those
// inline scripts and styles (by their hashes), so that nothing a record
// holds could run even if it reached the markup, and the page asks no
// network for anything.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink"
)

// ReportOptions configure WriteReport.
type ReportOptions struct {
	Dirs []string
	Out  string // the file to write
	// PerFinish is how many records of each finish reason the report
	// shows (default 3); TextBytes bounds each text of one (default
	// 16 KiB; the rest is cut, and said so).
	PerFinish int
	TextBytes int
	// Progress, when set, is told how far the index is, every so often.
	Progress func(Progress)
	Now      func() time.Time
}

// reportData is what the report's script reads (#view-data).
type reportData struct {
	History []*Series `json:"history"`
	Dist    *Dist     `json:"dist"`
}

// Sample is the records of one finish reason the report shows.
type Sample struct {
	Finish string
	Count  int64
	Rows   []Row
	Cut    bool // a text was cut to TextBytes
}

type reportView struct {
	page
	Generated string
	CSP       string
	UPlotCSS  template.CSS
	ViewCSS   template.CSS
	UPlotJS   template.JS
	ViewJS    template.JS
	Data      reportData
	Samples   []Sample
}

// WriteReport reads o.Dirs (building their index) and writes the report to
// o.Out: atomically, so a report that could not be finished leaves no
// file. It returns the number of bytes written.
func WriteReport(ctx context.Context, o ReportOptions) (int, error) {
	if o.PerFinish <= 0 {
		o.PerFinish = 3
	}
	if o.TextBytes <= 0 {
		o.TextBytes = 16 << 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for _, d := range o.Dirs {
		if err := CheckDir(d); err != nil {
			return 0, err
		}
	}
	ix := NewIndex(o.Dirs)
	defer ix.Close()
	ix.Start()
	if o.Progress != nil {
		tick := time.NewTicker(time.Second)
		for waiting := true; waiting; {
			select {
			case <-ix.done:
				waiting = false
			case <-tick.C:
				o.Progress(ix.Progress())
			case <-ctx.Done():
				waiting = false
			}
		}
		tick.Stop()
	}
	if err := ix.Wait(ctx); err != nil {
		return 0, err
	}
	pages, err := parsePages()
	if err != nil {
		return 0, err
	}
	v := reportView{page: page{Title: "report", Static: true, Progress: ix.Progress(), Now: o.Now()}}
	v.Generated = utc(o.Now())
	maxTokens := 0
	for i, d := range o.Dirs {
		info := readDir(i, d)
		v.Dirs = append(v.Dirs, info)
		if maxTokens == 0 && info.Job != nil {
			maxTokens = info.Job.Sampling.MaxTokens
		}
		h, err := ReadHistory(d)
		if err != nil {
			return 0, err
		}
		v.Data.History = append(v.Data.History, h)
	}
	v.Segments = ix.Problems()
	v.Data.Dist = ix.Dist(maxTokens)
	for _, f := range v.Data.Dist.Finish {
		q := AnyQuery
		q.Finish, q.Errors = f.Name, strings.HasPrefix(f.Name, "error: ")
		pos := ix.Select(q)
		rows, err := ix.Rows(pos[:min(len(pos), o.PerFinish)])
		if err != nil {
			return 0, err
		}
		s := Sample{Finish: f.Name, Count: f.Count}
		for k := range rows {
			if rows[k].Record != nil {
				var cut bool
				rows[k].Record, cut = cutRecord(rows[k].Record, o.TextBytes)
				s.Cut = s.Cut || cut
			}
		}
		s.Rows = rows
		v.Samples = append(v.Samples, s)
	}
	read := func(name string) string {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		return string(b)
	}
	ujs, vjs, ucss, vcss := read("uPlot.iife.min.js"), read("view.js"), read("uPlot.min.css"), read("view.css")
	for _, s := range []string{ujs, vjs} {
		if strings.Contains(strings.ToLower(s), "</script") {
			return 0, fmt.Errorf("view: an embedded script holds </script: it cannot be inlined")
		}
	}
	v.UPlotJS, v.ViewJS, v.UPlotCSS, v.ViewCSS = template.JS(ujs), template.JS(vjs), template.CSS(ucss), template.CSS(vcss)
	v.CSP = "default-src 'none'; script-src " + hash(ujs) + " " + hash(vjs) + "; style-src " + hash(ucss) + " " + hash(vcss) +
		"; img-src data:; base-uri 'none'; form-action 'none'"
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "report.html", v); err != nil {
		return 0, fmt.Errorf("view: report: %w", err)
	}
	if err := durable.WriteFile(o.Out, buf.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return buf.Len(), nil
}

// hash is a CSP source for an inline script or style of text s.
func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// cutRecord is a copy of rec with each text cut to n bytes (at a rune
// boundary), and whether one was.
func cutRecord(rec *sink.Record, n int) (*sink.Record, bool) {
	r := *rec
	cut := false
	c := func(s string) string {
		if len(s) <= n {
			return s
		}
		cut = true
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i] + fmt.Sprintf("\n[… %d more bytes: the directory holds them all]", len(s)-i)
	}
	r.Reasoning, r.Content = c(r.Reasoning), c(r.Content)
	r.Messages = append([]chat.Message(nil), rec.Messages...)
	for i := range r.Messages {
		r.Messages[i].Content = c(r.Messages[i].Content)
	}
	r.Turns = append([]sink.Turn(nil), rec.Turns...)
	for i := range r.Turns {
		r.Turns[i].Reasoning, r.Turns[i].Content = c(r.Turns[i].Reasoning), c(r.Turns[i].Content)
	}
	return &r, cut
}
