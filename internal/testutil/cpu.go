package testutil

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time this process has used so far, user and
// system: a benchmark reports CPU per operation beside its rate, which a
// loaded machine skews far less.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
