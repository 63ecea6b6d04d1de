// Package job holds what a run asks and what a directory holds of it: the
// Job (which rows, how a row becomes the messages sent, how the model
// samples), its identity hash and the diff that names a changed setting,
// its form in the manifest, and the Plan of a directory (done, failed,
// pending). It talks to no server, so inspect and export import it without
// linking an HTTP client.
package job
