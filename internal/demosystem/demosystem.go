// Package demosystem is an external HTTP system, in process, that records
// every request it receives and fails on command: the dev stack's stand-in
// for an ERP and the tests' target for cached calls.
//
// Everything under /api/ is the API: any method, any path, a JSON body or
// none. The control surface — /control/fail, /control/recover, /requests and
// the page at / — lets a human drive it with curl and is never recorded.
package demosystem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Request is one API request as the system saw it.
type Request struct {
	// ID is the request's sequence number, from 1 in arrival order; a
	// successful request is answered with it as "id".
	ID int `json:"id"`
	// At is when the request arrived.
	At time.Time `json:"at"`
	// Method is the HTTP method.
	Method string `json:"method"`
	// Path is the path below /api, e.g. /orders/42 for /api/orders/42.
	Path string `json:"path"`
	// Query is the raw query string, without "?".
	Query string `json:"query"`
	// Body is the JSON body; nil when the body was empty or not JSON.
	Body json.RawMessage `json:"body"`
	// Header is a copy of the request's header.
	Header http.Header `json:"header"`
	// Status is the HTTP status the system answered.
	Status int `json:"status"`
}

// clone copies the parts a caller could mutate, so the record stays as it was.
func (r Request) clone() Request {
	r.Header = r.Header.Clone()
	r.Body = bytes.Clone(r.Body)
	return r
}

// System is the demo external system: it accepts any JSON request on its API
// paths, records every request, and fails on command. It is safe for
// concurrent use.
type System struct {
	server   *http.Server
	listener net.Listener

	mu        sync.Mutex
	requests  []Request
	fail      failMode
	onRequest func(Request)
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves in a
// goroutine until Close.
func Start(addr string) (*System, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo system: listen on %s: %w", addr, err)
	}
	s := &System{listener: ln, onRequest: func(Request) {}}
	s.server = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go s.server.Serve(ln) //nolint:errcheck // returns http.ErrServerClosed when Close is called
	return s, nil
}

// URL is the system's base URL, e.g. http://127.0.0.1:8090; the API is under URL()+"/api/".
func (s *System) URL() string { return "http://" + s.listener.Addr().String() }

// Close stops listening and drops open connections, so later requests get
// "connection refused": what tests use as "target down".
func (s *System) Close() error { return s.server.Close() }

// OnRequest calls f, outside the system's lock, with every API request once
// it is recorded and before it is answered (the dev stack logs them).
func (s *System) OnRequest(f func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRequest = f
}

// FailNext makes the next n API requests answer status (a 4xx or 5xx, e.g.
// 503, 500, 400, 429) with a JSON error body {"error": "..."}; n < 0 fails
// every request until Recover, n == 0 clears the failure mode. It replaces
// any failure mode already set. A status outside 400-599 is a programming
// error and panics.
func (s *System) FailNext(n int, status int) {
	if !isErrorStatus(status) {
		panic(fmt.Sprintf("demosystem: FailNext status %d is not a 4xx or 5xx", status))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = failMode{left: n, status: status}
}

// Recover clears any failure mode: API requests succeed again.
func (s *System) Recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = failMode{}
}

// Requests returns a copy of every API request received so far, oldest
// first, failed ones included. A request is recorded before it is answered,
// so a client that has its answer finds its request here.
func (s *System) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.clone()
	}
	return out
}

// admit numbers req, decides its answer under the failure mode (or the
// refusal its body earned) and records it, all under one lock so that
// concurrent requests consume FailNext's count exactly once each.
func (s *System) admit(req Request, refused answer) (Request, answer) {
	s.mu.Lock()
	a := s.fail.take()
	if a.status == 0 {
		a = refused
	}
	if a.status == 0 {
		a = answer{status: http.StatusOK}
	}
	req.ID = len(s.requests) + 1
	req.Status = a.status
	s.requests = append(s.requests, req)
	onRequest := s.onRequest
	s.mu.Unlock()
	onRequest(req.clone())
	return req, a
}

// recent returns the last n requests, newest first, and how many there are in all.
func (s *System) recent(n int) ([]Request, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := len(s.requests)
	out := make([]Request, 0, min(n, total))
	for i := total - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, s.requests[i])
	}
	return out, total
}

// mode describes the current failure mode for the page and the control replies.
func (s *System) mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail.String()
}

// answer is the status an API request gets and, when it fails, why.
type answer struct {
	status int
	reason string
}

// failMode is what FailNext set: left requests still to fail with status.
type failMode struct {
	left   int // negative: until Recover; 0: not failing
	status int
}

// take consumes one failure, returning the answer it imposes or the zero
// answer when the system is not failing.
func (f *failMode) take() answer {
	if f.left == 0 {
		return answer{}
	}
	a := answer{status: f.status, reason: fmt.Sprintf("demo system failing on purpose: %d %s", f.status, http.StatusText(f.status))}
	if f.left > 0 {
		f.left--
	}
	if f.left == 0 {
		*f = failMode{}
	}
	return a
}

// String describes the failure mode in words.
func (f failMode) String() string {
	switch {
	case f.left == 0:
		return "none: API requests succeed"
	case f.left < 0:
		return fmt.Sprintf("every API request answers %d until recover", f.status)
	case f.left == 1:
		return fmt.Sprintf("the next API request answers %d", f.status)
	default:
		return fmt.Sprintf("the next %d API requests answer %d", f.left, f.status)
	}
}

func isErrorStatus(status int) bool { return status >= 400 && status <= 599 }
