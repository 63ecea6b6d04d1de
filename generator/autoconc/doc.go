// Package autoconc is concurrency: auto: a Controller that answers the next
// limit from one endpoint's server metrics, and the Loop that scrapes every
// endpoint at an interval, asks their controllers and sets the run's limit.
// It knows the run only through Target and the counts it is handed.
package autoconc
