//go:build !linux

package blocking

import "testing"

type cpuTimer struct{}

func startCPU(*testing.B) *cpuTimer      { return &cpuTimer{} }
func (*cpuTimer) report(*testing.B, int) {}
