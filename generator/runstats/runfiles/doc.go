// Package runfiles writes the run's files in its output directory from
// the figures of package runstats: status.json and report.json (the
// StatusWriter, the documents' schema: StatusRecord, ReportRecord) and
// history.jsonl (History). Users' scripts read these files, so their bytes
// are pinned by golden tests (testdata/); `synthgen view` reads them back
// with the same types.
package runfiles
