package site

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Notify from concurrent callers, the SDK's hot path and the "enqueue, N
// callers (SDK Notify)" rows of outpost bench; internal/sitestore's
// benchmarks have the raw-insert baselines. Run:
// go test ./site -run '^$' -bench Notify -cpuprofile cpu.out
func BenchmarkNotify(b *testing.B) {
	body := strings.Repeat("Pump 3 tripped: discharge pressure below the low-low limit. ", 9)[:512]
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			c, err := Open(context.Background(), filepath.Join(b.TempDir(), "site.db"),
				Options{SiteID: "plant-1", Node: "node-a", Script: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			start, cpu0 := time.Now(), cpuTime()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if _, err := c.Notify(context.Background(), "ops", "Pump 3 tripped", body); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "notify/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
