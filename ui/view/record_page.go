package view

// The record page: one record, or one key that failed for good, addressed
// by its key (id and sample, and the directory among several), never by
// its position in the index, which a refresh or a restart changes.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/synthgen/synthgen/sink"
)

// recordView is the record page's data.
type recordView struct {
	page
	Row     Row
	DirPath string
	History []sink.ErrorRecord
	HistErr string
	Raw     string
}

// recordURL is the address of the record page of key (id, sample) in
// directory dir: by the key, which lasts across restarts of the view and
// new records, not by a position in the index.
func recordURL(id string, sample, dir int) string {
	return "/record?" + url.Values{"id": {id}, "sample": {strconv.Itoa(sample)}, "dir": {strconv.Itoa(dir)}}.Encode()
}

// recordByPath is /record/ID: the record of that id (sample 0 unless
// ?sample=), for an address typed by hand.
func (s *Server) recordByPath(w http.ResponseWriter, r *http.Request) {
	s.recordOf(w, r, r.PathValue("id"))
}

// recordByKey is /record?id=ID&sample=N&dir=D (dir: any directory when
// not given), the address the table links to.
func (s *Server) recordByKey(w http.ResponseWriter, r *http.Request) {
	s.recordOf(w, r, r.URL.Query().Get("id"))
}

// recordOf shows the record of id, with the sample and directory of r's
// query.
func (s *Server) recordOf(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	sample := 0
	if v := q.Get("sample"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("view: sample %q: a whole number", v))
			return
		}
		sample = n
	}
	dir := -1
	if d := q.Get("dir"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n >= len(s.opts.Dirs) {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("view: dir %q: 0..%d", d, len(s.opts.Dirs)-1))
			return
		}
		dir = n
	}
	if err := s.ix.Wait(r.Context()); err != nil && !s.ix.Ready() {
		return
	}
	s.refresh()
	pos, err := s.ix.Find(dir, sink.Key{ID: id, Sample: sample})
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if pos < 0 {
		s.fail(w, http.StatusNotFound, fmt.Errorf("view: no record of id %q sample %d", id, sample))
		return
	}
	s.showRecord(w, pos)
}

func (s *Server) showRecord(w http.ResponseWriter, pos int32) {
	if int(pos) >= s.ix.Len() {
		s.fail(w, http.StatusNotFound, fmt.Errorf("view: no record %d", pos))
		return
	}
	rows, err := s.ix.Rows([]int32{pos})
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	v := recordView{page: s.basePage("record"), Row: rows[0]}
	v.DirPath = s.opts.Dirs[v.Row.Dir]
	if v.Row.Record != nil {
		v.Title = "record " + v.Row.Record.ID
		b, _ := json.MarshalIndent(v.Row.Record, "", "  ")
		v.Raw = string(b)
	}
	if v.Row.Errors > 0 || v.Row.Failed != nil {
		v.History, err = ErrorHistory(v.DirPath, sink.Key{ID: v.Row.ID(), Sample: v.Row.Sample()})
		if err != nil {
			v.HistErr = err.Error()
		}
	}
	s.render(w, "record.html", v)
}
