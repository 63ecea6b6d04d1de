package runstats

// Summary counts what one Run did. It is a view of the run's Stats (the
// one ledger: the writer and the producer report there, and only there),
// taken when Run returns.
type Summary struct {
	Written int   // records written
	Failed  int   // error records written
	Skipped int64 // keys already done on disk
	// SkippedFailed are keys that failed for good in an earlier run and
	// were not asked again (no RetryErrors): not done.
	SkippedFailed int64
	// BadRows are dataset rows skipped as bad (dataset.on_bad_row: skip),
	// each reported with its file and line; Duplicates of them repeat an
	// earlier row's id.
	BadRows int64
	Drained bool // intake stopped (Drain, or ctx) before the source ended
	// Canceled are keys whose requests the run abandoned when it stopped
	// (begun in a slot, then cut or not retried; redone on resume): never
	// more than were in flight.
	Canceled int
	// Lost are records and error records written but taken back: the sink
	// failed before an fsync made them durable (redone on resume).
	Lost int
	// Duplicates counts the bad rows that repeat the id of an earlier row:
	// each key is asked once, by its first row.
	Duplicates int
}
