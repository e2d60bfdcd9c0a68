package devserver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ListeningPorts lists the TCP ports the process listening on port listens
// on, read from /proc (Linux only): the dev server's ports, the ones the
// CLI picks among them. Only the caller's own processes are looked at.
func ListeningPorts(port int) ([]int, error) {
	listening, err := listeningSockets()
	if err != nil {
		return nil, err
	}
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		inodes := socketInodes(pid)
		if slices.ContainsFunc(inodes, func(i string) bool { return listening[i] == port }) {
			var ports []int
			for _, i := range inodes {
				if p, ok := listening[i]; ok && !slices.Contains(ports, p) {
					ports = append(ports, p)
				}
			}
			slices.Sort(ports)
			return ports, nil
		}
	}
	return nil, fmt.Errorf("no process of this user listens on port %d", port)
}

// listeningSockets maps the inode of each listening TCP socket to its port.
func listeningSockets() (map[string]int, error) {
	out := map[string]int{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ... uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
				out[fields[9]] = int(p)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no listening sockets in /proc/net (not Linux?)")
	}
	return out, nil
}

// socketInodes are the inodes of the sockets process dir /proc/<pid> has
// open; none for a process of another user.
func socketInodes(procDir string) []string {
	fds, _ := os.ReadDir(filepath.Join(procDir, "fd"))
	var inodes []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(procDir, "fd", fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); ok && err == nil {
			inodes = append(inodes, strings.TrimSuffix(inode, "]"))
		}
	}
	return inodes
}
