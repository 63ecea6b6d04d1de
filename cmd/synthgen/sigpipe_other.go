//go:build !unix

package main

// ignoreBrokenPipe: no SIGPIPE off unix.
func ignoreBrokenPipe() {}
