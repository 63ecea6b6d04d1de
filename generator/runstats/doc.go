// Package runstats holds the run's figures and the files that carry them:
// Stats, the one ledger every event of a run is counted in (the pool's
// slots, the writer, the producer and the router report there), its
// Snapshot for a renderer, the ProgressRecord that status.json and the
// progress line are made of, and the StatusWriter of status.json and
// report.json. A new figure is a counter in Stats, a field of Snapshot
// and, to be seen, of ProgressRecord.
package runstats
