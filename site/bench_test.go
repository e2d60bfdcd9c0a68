package site

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/internal/testutil"
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
			start, cpu0 := time.Now(), testutil.ProcessCPU()
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
			b.ReportMetric(float64((testutil.ProcessCPU()-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
		})
	}
}
