//go:build !linux

package main

import "os/exec"

// dieWithTest: only Linux can tie a child's life to its parent's
// (orphan_linux_test.go); elsewhere t.Cleanup's kill is all there is.
func dieWithTest(*exec.Cmd) {}
