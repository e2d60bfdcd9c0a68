package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time (user and system) a running process has used
// so far, to the nanosecond: the kernel's CPU clock of the process, the
// clock clock_getcpuclockid(3) names (Linux). /proc/<pid>/stat counts in
// clock ticks, and a central worker that ran a few milliseconds over a
// short run read as 0.
func processCPU(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(processCPUClock(pid), &ts); err != nil {
		return 0, fmt.Errorf("read process %d's CPU time (needs Linux's process CPU clocks): %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// processCPUClock is the id of pid's CPU clock, as glibc's
// clock_getcpuclockid makes it: the pid's complement shifted past the
// clock's three type bits, CPUCLOCK_SCHED (2, the scheduler's exact sum)
// and no per-thread bit.
func processCPUClock(pid int) int32 {
	const cpuclockSched = 2
	return int32(^pid<<3 | cpuclockSched)
}

// processTreeCPU is the CPU time a process and its children have used so
// far: its own, its exited children's (which the kernel adds to it when it
// reaps them) and each live child's, with that child's exited children.
// PostgreSQL serves each connection in a child of the postmaster; a child
// that exits between two readings is counted live in the first and through
// its parent in the second, so the difference is exact.
func processTreeCPU(pid int) (time.Duration, error) {
	root, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	total := root.cpu + root.childrenCPU
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, path := range stats {
		n, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		st, err := readStat(n)
		if err != nil || st.ppid != pid {
			continue // gone since the glob, or not a child
		}
		total += st.cpu + st.childrenCPU
	}
	return total, nil
}

// procStat is what the benchmark reads from /proc/<pid>/stat.
type procStat struct {
	ppid int
	// cpu is user and system time; childrenCPU the same of its exited
	// children that it waited for.
	cpu, childrenCPU time.Duration
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("read process %d's CPU time (needs Linux's /proc): %w", pid, err)
	}
	// The command name (field 2) may hold spaces; the fields after it
	// start at state (field 3), so ppid (4) is 1, utime, stime, cutime and
	// cstime (14 to 17) are 11 to 14.
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	var n [5]int64
	for i, f := range []string{fields[1], fields[11], fields[12], fields[13], fields[14]} {
		if n[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return procStat{
		ppid:        int(n[0]),
		cpu:         time.Duration(n[1]+n[2]) * clockTick,
		childrenCPU: time.Duration(n[3]+n[4]) * clockTick,
	}, nil
}

// machineCPU is the machine's CPU time so far, from /proc/stat's first
// line: busy is everything but idle and I/O wait, total everything.
type machineCPU struct {
	busy, total time.Duration
}

func readMachineCPU() (machineCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, fmt.Errorf("read the machine's CPU time (needs Linux's /proc): %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var m machineCPU
	// user nice system idle iowait irq softirq steal (guest time is
	// already counted in user and nice).
	for i, f := range fields[1:min(len(fields), 9)] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		d := time.Duration(n) * clockTick
		m.total += d
		if i != 3 && i != 4 {
			m.busy += d
		}
	}
	return m, nil
}

// childOf finds this process's child whose command line holds every one of
// args: the dev server, which testsuite starts and does not expose.
func childOf(args ...string) (int, error) {
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // gone since the glob
		}
		end := bytes.LastIndexByte(data, ')')
		fields := strings.Fields(string(data[end+1:]))
		if end < 0 || len(fields) < 2 || fields[1] != self {
			continue
		}
		dir := filepath.Dir(stat)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !holdsAll(strings.Split(string(cmdline), "\x00"), args) {
			continue
		}
		return strconv.Atoi(filepath.Base(dir))
	}
	return 0, fmt.Errorf("no child process of %s with arguments %q (needs Linux's /proc)", self, args)
}

func holdsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
