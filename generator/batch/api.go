// Package batch is the batch-API run mode: the requests the pool asks are
// written as a provider's batch input files (OpenAI's Files and Batch
// API), each batch recorded in DIR/batches.json before it is submitted,
// polled, and its output lines handed back to the requests that wait for
// them, so that records go through the sink as in a normal run.
package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
)

// API is a client of one server's /v1/files and /v1/batches.
type API struct {
	Base string // the API's base URL, e.g. https://api.openai.com/v1
	Key  string // bearer token; "" none
	HTTP *http.Client
}

// File is OpenAI's file object, the fields read.
type File struct {
	ID    string `json:"id"`
	Bytes int64  `json:"bytes"`
}

// Counts is a batch's request_counts.
type Counts = runfiles.BatchCounts

// Batch is OpenAI's batch object, the fields read.
type Batch struct {
	ID           string            `json:"id"`
	Status       string            `json:"status"`
	InputFileID  string            `json:"input_file_id"`
	OutputFileID string            `json:"output_file_id"`
	ErrorFileID  string            `json:"error_file_id"`
	Counts       Counts            `json:"request_counts"`
	Metadata     map[string]string `json:"metadata"`
	Errors       *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
}

// Ended reports whether the batch's status is final: no more output comes.
func (b *Batch) Ended() bool {
	switch b.Status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// why is what the batch's errors say, for the error records of its rows.
func (b *Batch) why() string {
	if b.Errors == nil || len(b.Errors.Data) == 0 {
		return "batch " + b.ID + " " + b.Status + " without this request's answer"
	}
	e := b.Errors.Data[0]
	return fmt.Sprintf("batch %s %s: %s: %s", b.ID, b.Status, e.Code, e.Message)
}

// StatusError is a non-2xx answer of the API.
type StatusError struct {
	Op     string
	Status int
	Body   string // its first bytes
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Body)
}

// Transient reports whether err may pass if the call is made again: a
// connection's failure, a 408, 409, 429 or 5xx, or one the caller marked
// so (tryAgain).
func Transient(err error) bool {
	var again tryAgain
	if errors.As(err, &again) {
		return true
	}
	var se *StatusError
	if !errors.As(err, &se) {
		return true
	}
	return se.Status == 408 || se.Status == 409 || se.Status == 429 || se.Status >= 500
}

// tryAgain marks an error Transient would not call so, for a few more
// tries (a 404 of a batch the provider may yet find).
type tryAgain struct{ error }

func (t tryAgain) Unwrap() error { return t.error }

// notFound reports whether err is the API's 404.
func notFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusNotFound
}

// maxAnswer bounds a JSON answer of the API read into memory.
const maxAnswer = 16 << 20

func (a *API) do(ctx context.Context, op, method, path string, body io.Reader, ctype string, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.Base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if a.Key != "" {
		req.Header.Set("Authorization", "Bearer "+a.Key)
	}
	resp, err := a.client().Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &StatusError{Op: op, Status: resp.StatusCode, Body: strings.ToValidUTF8(string(b), "?")}
	}
	if w, ok := into.(io.Writer); ok {
		if _, err := io.Copy(w, resp.Body); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON expected: %w", op, err)
	}
	return nil
}

func (a *API) client() *http.Client {
	if a.HTTP != nil {
		return a.HTTP
	}
	return http.DefaultClient
}

// Upload posts a batch input file (POST /files, purpose batch), streamed
// from r.
func (a *API) Upload(ctx context.Context, name string, r io.Reader) (File, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("purpose", "batch")
		var part io.Writer
		if err == nil {
			part, err = mw.CreateFormFile("file", name)
		}
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var f File
	err := a.do(ctx, "upload "+name, http.MethodPost, "/files", pr, mw.FormDataContentType(), &f)
	pr.Close()
	if err == nil && f.ID == "" {
		err = fmt.Errorf("upload %s: the answer names no file id", name)
	}
	return f, err
}

// Create creates a batch of the uploaded file's chat completions.
func (a *API) Create(ctx context.Context, fileID, window string, meta map[string]string) (Batch, error) {
	body, _ := json.Marshal(map[string]any{"input_file_id": fileID, "endpoint": lineURL,
		"completion_window": window, "metadata": meta})
	var b Batch
	err := a.do(ctx, "create batch of "+fileID, http.MethodPost, "/batches", bytes.NewReader(body), "application/json", &b)
	if err == nil && b.ID == "" {
		err = fmt.Errorf("create batch of %s: the answer names no batch id", fileID)
	}
	return b, err
}

// Get reads a batch.
func (a *API) Get(ctx context.Context, id string) (Batch, error) {
	var b Batch
	err := a.do(ctx, "get batch "+id, http.MethodGet, "/batches/"+url.PathEscape(id), nil, "", &b)
	return b, err
}

// Find is the batch whose metadata holds every pair of meta, looked for in
// the server's list (GET /batches, every page); false when none does.
func (a *API) Find(ctx context.Context, meta map[string]string) (Batch, bool, error) {
	after := ""
	for {
		var page struct {
			Data    []Batch `json:"data"`
			HasMore bool    `json:"has_more"`
			LastID  string  `json:"last_id"`
		}
		q := "/batches?limit=100"
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		if err := a.do(ctx, "list batches", http.MethodGet, q, nil, "", &page); err != nil {
			return Batch{}, false, err
		}
		for _, b := range page.Data {
			if holds(b.Metadata, meta) {
				return b, true, nil
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return Batch{}, false, nil
		}
		if after = page.LastID; after == "" {
			after = page.Data[len(page.Data)-1].ID
		}
	}
}

func holds(m, want map[string]string) bool {
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// Content copies a file's content (GET /files/{id}/content) to w.
func (a *API) Content(ctx context.Context, id string, w io.Writer) error {
	return a.do(ctx, "download file "+id, http.MethodGet, "/files/"+url.PathEscape(id)+"/content", nil, "", w)
}
