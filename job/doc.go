// Package job holds what a run asks: the Job (which rows, how a row
// becomes the messages sent, how the model samples), its identity hash and
// the diff that names a changed setting, and its form in the manifest. It
// is a value: it does no I/O beyond reading a manifest's job back, and
// talks to no server, so inspect and export import it without linking an
// HTTP client. What a directory holds of a job is package job/plan's.
package job
