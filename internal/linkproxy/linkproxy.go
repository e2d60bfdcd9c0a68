// Package linkproxy is a TCP proxy that stands for the network between two
// processes on one machine: it can cut the link and heal it (a partition
// while both processes stay up), and delay every chunk it forwards (a long
// link: a WAN, a satellite hop). Tests and `outpost bench` put it in front
// of a Temporal frontend or a site pair's peer.
package linkproxy

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections to a target that can be set after it
// starts.
type Proxy struct {
	ln net.Listener
	// delay is how long each chunk read from one side waits before it is
	// written to the other, in nanoseconds: half the round trip.
	delay atomic.Int64

	mu     sync.Mutex
	target string
	cut    bool
	conns  map[net.Conn]struct{}
}

// Listen starts a proxy on a free loopback port. Close stops it.
func Listen() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen on a loopback port: %w", err)
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget sets where connections go.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// SetRoundTrip makes the link a round trip of rtt long: every chunk read
// from either side is written to the other rtt/2 after it was read. Chunks
// read meanwhile follow it without waiting for it, as on a real long link,
// so a connection carries many requests in flight at once. It applies to
// the chunks read from then on; 0 forwards at once.
func (p *Proxy) SetRoundTrip(rtt time.Duration) { p.delay.Store(int64(rtt / 2)) }

// Cut closes every connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	target, cut := p.target, p.cut
	p.mu.Unlock()
	if cut || target == "" {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		p.copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// chunk is what one read got, and when it is due on the other side.
type chunk struct {
	data []byte
	due  time.Time
}

// copy forwards src to dst until either fails, each chunk held back by
// the delay set when it was read. Reading goes on while earlier
// chunks wait, so the delay adds latency and takes no bandwidth.
func (p *Proxy) copy(dst, src net.Conn) {
	// Room for every chunk of a busy connection's longest delay: a full
	// channel would stop the reading and lengthen the link.
	chunks := make(chan chunk, 16384)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(time.Duration(p.delay.Load()))
				chunks <- chunk{data: append([]byte(nil), buf[:n]...), due: due}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range chunks {
		if wait := time.Until(ch.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(ch.data); err != nil {
			src.Close() // ends the reader, which closes chunks
			for range chunks {
			}
			return
		}
	}
}
