// Package generator is the front door of a run: Open pins the job (its
// dataset, the model the servers serve), opens and recovers the output
// directory and prepares the pool; Runner.Run asks what is left; Drain and
// Close end it. The work is done in its packages of one job each: job
// (what is asked, and the plan of a directory), wire (the HTTP client),
// pool (requests in flight), runstats (the run's figures and status
// files) and autoconc (concurrency: auto).
package generator
