// Package httpserve holds what every Outpost HTTP server shares: timeouts
// that a slow or idle client cannot hold open forever, and a cap on open
// connections that answers the excess at once instead of running the
// process out of file descriptors.
package httpserve

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxConnections is the most connections a server holds open at once.
const MaxConnections = 1024

// Server returns a server for h with bounded reads, idle connections and
// headers. It sets no write timeout: a cached call's immediate attempt may
// legitimately take its target's full timeout.
func Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// ShutdownGrace is how long a stopping server lets requests in flight
// finish before it closes their connections.
const ShutdownGrace = 5 * time.Second

// Shutdown stops srv: it takes no new connections, lets requests in flight
// finish for ShutdownGrace, then closes every connection left. Shutdown
// alone would wait as long for a connection that never sent a request (a
// port scanner, a peer that went away mid-dial: net/http counts it busy for
// its first five seconds), and a stop would fail on nobody's request.
func Shutdown(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(ctx); err == nil {
		return nil
	}
	return srv.Close()
}

// LimitListener accepts at most max connections at a time from ln. One
// more is answered "503 Service Unavailable" and closed at once: a flood of
// idle connections costs the server no descriptors past max, and a client
// over the cap learns why at once instead of waiting in the backlog.
func LimitListener(ln net.Listener, max int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
}

// overloaded is the whole answer to a connection over the cap.
const overloaded = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 52\r\n\r\ntoo many open connections to this server; try again\n"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			go refuse(c)
		}
	}
}

// refuse answers a connection over the cap and closes it.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte(overloaded))
	_ = c.Close()
}

// slotConn gives its slot back when closed, once.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// IsLoopback reports whether a listen address (host:port) is reachable
// from this host only: a loopback IP or localhost. An empty host listens on
// every interface. `config check` asks it too, through config.IsLoopback.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HostNames are the names, beside localhost and IP addresses, a server
// listening at listen answers to: names, and the host of listen when it is
// a name.
func HostNames(listen string, names []string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(host) != nil || slices.Contains(names, host) {
		return names
	}
	return append(slices.Clip(names), host)
}

// HostAllowed reports whether a request's Host header (host or host:port)
// names the server: localhost, an IP address, or one of names, without
// regard to case or a trailing dot. A DNS-rebinding page reaches a server
// on loopback under the page's own name, which is none of those, and the
// browser then treats the server's answers as the page's own.
func HostAllowed(hostport string, names []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return false // HTTP/1.1 requires Host; only a hand-made request lacks it
	}
	if strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil {
		return true
	}
	return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(strings.TrimSuffix(n, "."), host) })
}
