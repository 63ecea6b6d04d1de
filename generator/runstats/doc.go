// Package runstats holds the run's figures: Stats, the one ledger every
// event of a run is counted in (the pool's slots, the writer, the producer
// and the router report there), its Snapshot for a renderer, the
// ProgressRecord that status.json and the progress line are made of, the
// Summary of a run, and the Collector of synthgen's own metrics. The files
// that carry the figures (status.json, report.json, history.jsonl) are
// package runstats/runfiles's. A new figure is a counter in Stats, a field
// of Snapshot and, to be seen, of ProgressRecord.
package runstats
