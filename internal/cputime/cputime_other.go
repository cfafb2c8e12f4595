//go:build !linux

// Package cputime reads the CPU time of the calling thread: what a piece
// of work costs, not how long the scheduler kept it waiting. A goroutine
// that reads it locks itself to its thread first (runtime.LockOSThread).
package cputime

import "time"

// Thread is the CPU time the calling thread has used, and whether the
// system tells it: here it does not.
func Thread() (time.Duration, bool) { return 0, false }
