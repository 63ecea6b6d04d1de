package batchapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// file is one stored file.
type file struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
	data      []byte
}

// purposes are the upload purposes OpenAI accepts.
var purposes = []string{"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}

// addFile stores data as a new file and returns it.
func (h *Handler) addFile(name, purpose string, data []byte) *file {
	f := &file{ID: h.newID("file-"), Object: "file", Bytes: int64(len(data)),
		CreatedAt: h.opts.Clock().Unix(), Filename: name, Purpose: purpose, Status: "processed", data: data}
	h.mu.Lock()
	h.files[f.ID] = f
	h.fileOrder = append(h.fileOrder, f)
	h.mu.Unlock()
	return f
}

// uploadFile serves POST /v1/files: multipart with file and purpose.
func (h *Handler) uploadFile(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxFileBytes+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "the body must be multipart/form-data: "+err.Error(), "")
		return
	}
	var purpose, name string
	var data []byte
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "read multipart body: "+err.Error(), "")
			return
		}
		switch p.FormName() {
		case "purpose":
			b, _ := io.ReadAll(io.LimitReader(p, 64))
			purpose = string(b)
		case "file":
			name = p.FileName()
			if data, err = io.ReadAll(io.LimitReader(p, h.opts.MaxFileBytes+1)); err != nil {
				writeError(w, http.StatusBadRequest, "read file: "+err.Error(), "file")
				return
			}
		}
	}
	switch {
	case data == nil:
		writeError(w, http.StatusBadRequest, "missing required parameter: 'file'", "file")
	case int64(len(data)) > h.opts.MaxFileBytes:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("file is larger than %d bytes", h.opts.MaxFileBytes), "file")
	case !slices.Contains(purposes, purpose):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("purpose %q: want one of %v", purpose, purposes), "purpose")
	default:
		writeJSON(w, http.StatusOK, h.addFile(name, purpose, data))
	}
}

// lookupFile returns the file r's path names, or answers 404.
func (h *Handler) lookupFile(w http.ResponseWriter, r *http.Request) *file {
	h.mu.Lock()
	f := h.files[r.PathValue("id")]
	h.mu.Unlock()
	if f == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("No such File object: %s", r.PathValue("id")), "id")
	}
	return f
}

func (h *Handler) getFile(w http.ResponseWriter, r *http.Request) {
	if f := h.lookupFile(w, r); f != nil {
		writeJSON(w, http.StatusOK, f)
	}
}

func (h *Handler) deleteFile(w http.ResponseWriter, r *http.Request) {
	f := h.lookupFile(w, r)
	if f == nil {
		return
	}
	h.mu.Lock()
	delete(h.files, f.ID)
	h.fileOrder = slices.DeleteFunc(h.fileOrder, func(g *file) bool { return g == f })
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": f.ID, "object": "file", "deleted": true})
}

// listFiles serves GET /v1/files, newest first, filtered by purpose.
func (h *Handler) listFiles(w http.ResponseWriter, r *http.Request) {
	purpose := r.URL.Query().Get("purpose")
	h.mu.Lock()
	fs := slices.DeleteFunc(slices.Clone(h.fileOrder), func(f *file) bool { return purpose != "" && f.Purpose != purpose })
	h.mu.Unlock()
	slices.Reverse(fs)
	l, err := page(r, fs, func(f *file) string { return f.ID }, 10000, 10000)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "limit")
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// fileContent serves GET /v1/files/{id}/content, stopping part way while
// a HoldContent hold is on.
func (h *Handler) fileContent(w http.ResponseWriter, r *http.Request) {
	f := h.lookupFile(w, r)
	if f == nil {
		return
	}
	h.mu.Lock()
	hold, n := h.content, h.partial
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(f.data)))
	data := f.data
	if hold != nil {
		select {
		case <-hold.release:
		default:
			n = min(n, int64(len(data)))
			if _, err := w.Write(data[:n]); err != nil {
				return
			}
			http.NewResponseController(w).Flush() //nolint:errcheck // a client gone shows at the next write
			if !hold.wait(r.Context()) {
				return
			}
			data = data[n:]
		}
	}
	_, _ = w.Write(data)
}
