// Package view is synthgen view: a web page over one or more output
// directories, read while a run writes them or after it ended, never
// written to (no lock; a file counts as the audit's rule says). Its Index
// holds one entry per record, where the record is and its figures, in
// blocks outside the Go heap (store.go), never the record's text: a page
// reads its records from the parts by location. The server (server.go)
// renders html/template pages under a Content-Security-Policy that runs no
// script but its own files, draws the run's history and distributions
// with the vendored uPlot, and only answers GET. WriteReport writes the
// run page as one self-contained HTML file (--html) to read elsewhere.
package view
