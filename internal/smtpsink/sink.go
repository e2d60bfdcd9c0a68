// Package smtpsink is a real SMTP server, in process, that keeps what it
// receives: the dev stack's mailbox and the tests' delivery target.
package smtpsink

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5" //nolint:gosec // CRAM-MD5 is what SMTP clients speak without TLS; the sink is for tests and dev
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/outpost-dev/outpost/notification"
)

// Message is one received email.
type Message struct {
	From           string   `json:"from"`
	To             []string `json:"to"`
	Subject        string   `json:"subject"`
	NotificationID string   `json:"notificationId"`
	// Worker is the central worker that sent it (notification.HeaderWorker).
	Worker     string    `json:"worker,omitempty"`
	Body       string    `json:"body"`
	ReceivedAt time.Time `json:"receivedAt"`
	// Raw is the message as received, headers and body, for the page.
	Raw []byte `json:"-"`
}

// Attempt is one whole message the sink was sent, accepted or refused:
// which notification, from which worker, from the connection's opening to
// the sink's final reply. Tests check with it that no two workers ever
// send one notification at once.
type Attempt struct {
	NotificationID, Worker string
	Start, End             time.Time
	Accepted               bool
}

// Sink is the SMTP server.
type Sink struct {
	server   *smtp.Server
	listener net.Listener

	mu       sync.Mutex
	messages []Message
	reject   *smtp.SMTPError
	// rejectData refuses each message once it is read whole.
	rejectData *smtp.SMTPError
	attempts   []Attempt
	onEmail    func(Message)
	// hold, when set, is closed by the next message's session, which then
	// holds its DATA reply until the sink closes (HoldNextData).
	hold chan struct{}
	// closed is closed by Close: it releases held sessions.
	closed    chan struct{}
	closeOnce sync.Once
	// user and password, when set, are the only AUTH PLAIN accepted, and
	// mail is refused without it.
	user, password string
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves.
func Start(addr string) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("smtp sink: listen on %s: %w", addr, err)
	}
	s := &Sink{listener: ln, onEmail: func(Message) {}, closed: make(chan struct{})}
	s.server = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{sink: s, opened: time.Now()}, nil }))
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

// Close stops the server; connections are refused from then on, and a
// session holding its DATA reply ends without answering.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.server.Close()
}

// HoldNextData makes the next message's session, once it has the whole
// message, hold its final reply until the sink closes: the message is not
// recorded and the client waits for a 250 that never comes, as with a relay
// that stalls after DATA. The channel closes when a session holds. A
// client that gives up and closes the connection leaves the message
// unrecorded.
func (s *Sink) HoldNextData() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = make(chan struct{})
	return s.hold
}

// takeHold returns the pending hold, if any, and clears it: one message
// is held per HoldNextData.
func (s *Sink) takeHold() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold := s.hold
	s.hold = nil
	return hold
}

// RequireAuth makes the sink accept mail only after a login (AUTH PLAIN,
// or CRAM-MD5, which mail clients use without TLS) with user and password,
// as a relay that needs a login does.
func (s *Sink) RequireAuth(user, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.password = user, password
}

// checkLogin is the AUTH PLAIN check.
func (s *Sink) checkLogin(user, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user != "" && (user != s.user || password != s.password) {
		return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed"}
	}
	return nil
}

func (s *Sink) needsLogin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user != ""
}

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

// RejectData makes every message fail with code and text once the sink
// has read it whole, after DATA (a 4xx is transient, a 5xx permanent), so
// that each refused attempt is recorded with its notification and worker
// (see Attempts); code 0 accepts again.
func (s *Sink) RejectData(code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		s.rejectData = nil
		return
	}
	s.rejectData = &smtp.SMTPError{Code: code, Message: text}
}

// Attempts returns a copy of every whole message sent to the sink,
// accepted or refused after DATA, in the order of their final replies.
func (s *Sink) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Attempt(nil), s.attempts...)
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

// ServeHTTP shows what the sink received, newest first: a page for a
// browser (Accept: text/html), JSON for anyone else.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	msgs := s.Messages()
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	w.Header().Set("Vary", "Accept")
	if acceptsHTML(r) {
		servePage(w, msgs)
		return
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

// receive keeps m, or refuses it under RejectData, and records the
// attempt that sent it, which began when its connection opened.
func (s *Sink) receive(m Message, opened time.Time) error {
	s.mu.Lock()
	refused := s.rejectData
	s.attempts = append(s.attempts, Attempt{
		NotificationID: m.NotificationID, Worker: m.Worker,
		Start: opened, End: time.Now(), Accepted: refused == nil,
	})
	if refused != nil {
		s.mu.Unlock()
		return refused
	}
	s.messages = append(s.messages, m)
	onEmail := s.onEmail
	s.mu.Unlock()
	onEmail(m)
	return nil
}

type session struct {
	sink *Sink
	// opened is when the connection was accepted.
	opened   time.Time
	from     string
	to       []string
	loggedIn bool
}

const cramMD5 = "CRAM-MD5"

func (ss *session) AuthMechanisms() []string { return []string{cramMD5, sasl.Plain} }

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech == cramMD5 {
		return &cramMD5Server{sink: ss.sink, loggedIn: &ss.loggedIn}, nil
	}
	return sasl.NewPlainServer(func(_, user, password string) error {
		if err := ss.sink.checkLogin(user, password); err != nil {
			return err
		}
		ss.loggedIn = true
		return nil
	}), nil
}

// cramMD5Server is the server side of CRAM-MD5 (RFC 2195): a challenge,
// answered with the user and the HMAC-MD5 of it keyed by the password.
type cramMD5Server struct {
	sink      *Sink
	loggedIn  *bool
	challenge []byte
}

func (c *cramMD5Server) Next(response []byte) ([]byte, bool, error) {
	if c.challenge == nil {
		c.challenge = fmt.Appendf(nil, "<%d.%d@outpost-sink.local>", rand.Int64(), time.Now().UnixNano())
		return c.challenge, false, nil
	}
	user, digest, ok := strings.Cut(string(response), " ")
	if !ok {
		return nil, true, &smtp.SMTPError{Code: 501, Message: "malformed CRAM-MD5 response"}
	}
	c.sink.mu.Lock()
	wantUser, password := c.sink.user, c.sink.password
	c.sink.mu.Unlock()
	mac := hmac.New(md5.New, []byte(password))
	mac.Write(c.challenge)
	if wantUser != "" && (user != wantUser || !hmac.Equal([]byte(digest), []byte(hex.EncodeToString(mac.Sum(nil))))) {
		return nil, true, &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed"}
	}
	*c.loggedIn = true
	return nil, true, nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.sink.needsLogin() && !ss.loggedIn {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	ss.from = from
	return nil
}

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
	if hold := ss.sink.takeHold(); hold != nil {
		close(hold)
		<-ss.sink.closed
		return &smtp.SMTPError{Code: 421, Message: "sink closed while holding the reply"}
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
	return ss.sink.receive(Message{
		From: ss.from, To: ss.to, Subject: subject, Body: string(body),
		NotificationID: msg.Header.Get(notification.HeaderNotificationID), Worker: msg.Header.Get(notification.HeaderWorker),
		ReceivedAt: time.Now().UTC(), Raw: raw,
	}, ss.opened)
}

// Reset ends a message: the connection's next one begins now.
func (ss *session) Reset()        { ss.from, ss.to, ss.opened = "", nil, time.Now() }
func (ss *session) Logout() error { return nil }
