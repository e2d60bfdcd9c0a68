// Package smtpsink is a real SMTP server, in process, that keeps what it
// receives: the dev stack's mailbox and the tests' delivery target.
package smtpsink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/outpost-dev/outpost/internal/mailer"
)

// Message is one received email.
type Message struct {
	From           string    `json:"from"`
	To             []string  `json:"to"`
	Subject        string    `json:"subject"`
	NotificationID string    `json:"notificationId"`
	Body           string    `json:"body"`
	ReceivedAt     time.Time `json:"receivedAt"`
}

// Sink is the SMTP server.
type Sink struct {
	server   *smtp.Server
	listener net.Listener

	mu       sync.Mutex
	messages []Message
	reject   *smtp.SMTPError
	onEmail  func(Message)
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves.
func Start(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("smtp sink: listen on %s: %w", addr, err)
	}
	s := &Sink{listener: ln, onEmail: func(Message) {}}
	s.server = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{sink: s}, nil }))
	s.server.Domain = "outpost-sink.local"
	s.server.AllowInsecureAuth = true
	s.server.ReadTimeout, s.server.WriteTimeout = time.Minute, time.Minute
	go s.server.Serve(ln) //nolint:errcheck // returns when Close is called
	return s, nil
}

// Addr is the address the sink listens on.
func (s *Sink) Addr() string { return s.listener.Addr().String() }

// Port is the port the sink listens on.
func (s *Sink) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Close stops the server; connections are refused from then on.
func (s *Sink) Close() error { return s.server.Close() }

// Reject makes every message fail at RCPT with code and text (a 4xx is
// transient, a 5xx permanent); code 0 accepts again.
func (s *Sink) Reject(code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		s.reject = nil
		return
	}
	s.reject = &smtp.SMTPError{Code: code, Message: text}
}

// OnEmail calls f for every message received (the dev stack logs them).
func (s *Sink) OnEmail(f func(Message)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEmail = f
}

// Messages returns a copy of what was received, oldest first.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// CountByNotification counts received messages per notification id.
func (s *Sink) CountByNotification() map[string]int {
	counts := map[string]int{}
	for _, m := range s.Messages() {
		counts[m.NotificationID]++
	}
	return counts
}

// ServeHTTP shows what the sink received, newest first, as JSON.
func (s *Sink) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	msgs := s.Messages()
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]any{"count": len(msgs), "messages": msgs})
}

func (s *Sink) rejection() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reject == nil {
		return nil
	}
	return s.reject
}

func (s *Sink) receive(m Message) {
	s.mu.Lock()
	s.messages = append(s.messages, m)
	onEmail := s.onEmail
	s.mu.Unlock()
	onEmail(m)
}

type session struct {
	sink *Sink
	from string
	to   []string
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error { ss.from = from; return nil }

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.sink.rejection(); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return &smtp.SMTPError{Code: 554, Message: "unparseable message: " + err.Error()}
	}
	var bodyReader io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		bodyReader = quotedprintable.NewReader(msg.Body)
	}
	body, _ := io.ReadAll(bodyReader)
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject")
	}
	ss.sink.receive(Message{
		From: ss.from, To: ss.to, Subject: subject, Body: string(body),
		NotificationID: msg.Header.Get(mailer.HeaderNotificationID), ReceivedAt: time.Now().UTC(),
	})
	return nil
}

func (ss *session) Reset()        { ss.from, ss.to = "", nil }
func (ss *session) Logout() error { return nil }
