package outbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/outpost-dev/outpost/contract"
)

// Role is what a signed-in person may do on the page.
type Role string

const (
	// RoleViewer sees everything the page shows, and decodes payloads
	// through the codec endpoint, but cannot retry or discard.
	RoleViewer Role = "viewer"
	// RoleOperator may also retry and discard parked items.
	RoleOperator Role = "operator"
)

// Roles lists the roles a user can be given.
var Roles = []Role{RoleOperator, RoleViewer}

// User is one person who signs in with a password.
type User struct {
	// PasswordHash is the bcrypt hash of the password (htpasswd -nbBC 10,
	// or `outpost central hash-password`).
	PasswordHash string
	Role         Role
	// Regions limits the user to the pages of centrals serving one of
	// them (Options.Region); empty: every region's page.
	Regions []string
}

// Auth says who may use the page. With neither Users nor ProxyHeader the
// page is open: whoever reaches the listener acts as DefaultOperator (the
// central worker refuses that beyond loopback).
type Auth struct {
	// Users sign in on the page's login form.
	Users map[string]User
	// ProxyHeader names the header an authenticating proxy (oauth2-proxy,
	// for example X-Forwarded-User) sets to the signed-in user. It is read
	// only on requests from TrustedProxies; from anywhere else it is ignored.
	ProxyHeader    string
	TrustedProxies []netip.Prefix
	// ProxyOperators are the proxy's users with RoleOperator; the proxy's
	// other users are viewers.
	ProxyOperators []string
	// SessionKey signs session cookies. Give every central worker behind one
	// address the same key; empty: a random key, so sessions end on restart.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts. Default 12h.
	SessionTTL time.Duration
}

// Open reports whether the page asks nobody who they are.
func (a Auth) Open() bool { return len(a.Users) == 0 && a.ProxyHeader == "" }

// identity is who made a request.
type identity struct {
	Name string
	Role Role
	// ViaSession is true for a signed-in user, who can sign out.
	ViaSession bool
	// Regions are the regions whose pages the user may use; empty for all.
	Regions []string
}

func (id identity) CanAct() bool { return id.Role == RoleOperator }

// regionRefusal says why id may not use the page of a central serving
// region, "" when they may: a user limited to regions uses only their pages.
func (id identity) regionRefusal(region string) string {
	if len(id.Regions) == 0 || (region != "" && slices.Contains(id.Regions, region)) {
		return ""
	}
	quoted := make([]string, len(id.Regions))
	for i, r := range id.Regions {
		quoted[i] = strconv.Quote(r)
	}
	regions := "region " + quoted[0]
	if len(quoted) > 1 {
		regions = "regions " + strings.Join(quoted, ", ")
	}
	return fmt.Sprintf("%s may use the outbox pages of %s only, and this page's central serves %s: open the page of a region %s may use",
		id.Name, regions, contract.RegionWords(region), id.Name)
}

const sessionCookie = "outpost_outbox_session"

// authenticator finds the identity of each request.
type authenticator struct {
	auth Auth
	now  func() time.Time
	// dummyHash is compared against when the user name is unknown, so that
	// a wrong name takes as long as a wrong password: it has the cost of
	// the dearest user's hash (a hash of cost 12 takes four times as long
	// as one of 10).
	dummyHash []byte
}

func newAuthenticator(auth Auth, now func() time.Time) (*authenticator, error) {
	if auth.SessionTTL <= 0 {
		auth.SessionTTL = 12 * time.Hour
	}
	if len(auth.SessionKey) == 0 {
		auth.SessionKey = make([]byte, 32)
		if _, err := rand.Read(auth.SessionKey); err != nil {
			return nil, fmt.Errorf("outbox page: session key: %w", err)
		}
	}
	for name, u := range auth.Users {
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			return nil, fmt.Errorf("outbox page: user %q: password_hash is not a bcrypt hash: %w", name, err)
		}
		if !slices.Contains(Roles, u.Role) {
			return nil, fmt.Errorf("outbox page: user %q: role %q: want operator or viewer", name, u.Role)
		}
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("no such user"), dearestCost(auth.Users))
	if err != nil {
		return nil, fmt.Errorf("outbox page: %w", err)
	}
	return &authenticator{auth: auth, now: now, dummyHash: dummy}, nil
}

// dearestCost is the highest bcrypt cost of users' hashes (checked
// valid), bcrypt.DefaultCost when none: an unknown name is compared
// against a hash that costs as much as the dearest user's.
func dearestCost(users map[string]User) int {
	cost := 0
	for _, u := range users {
		c, _ := bcrypt.Cost([]byte(u.PasswordHash))
		cost = max(cost, c)
	}
	if cost == 0 {
		return bcrypt.DefaultCost
	}
	return cost
}

// identify returns who made r, and false when nobody signed in.
func (a *authenticator) identify(r *http.Request) (identity, bool) {
	if a.auth.Open() {
		return identity{Name: DefaultOperator, Role: RoleOperator}, true
	}
	if name := a.proxyUser(r); name != "" {
		role := RoleViewer
		if slices.Contains(a.auth.ProxyOperators, name) {
			role = RoleOperator
		}
		return identity{Name: name, Role: role}, true
	}
	if name, ok := a.sessionUser(r); ok {
		if u, known := a.auth.Users[name]; known {
			return identity{Name: name, Role: u.Role, ViaSession: true, Regions: u.Regions}, true
		}
	}
	return identity{}, false
}

// proxyUser is the proxy header's user when r comes from a trusted proxy.
func (a *authenticator) proxyUser(r *http.Request) string {
	if a.auth.ProxyHeader == "" || !a.fromTrustedProxy(r) {
		return ""
	}
	return strings.TrimSpace(r.Header.Get(a.auth.ProxyHeader))
}

// fromTrustedProxy reports whether r's peer is one of TrustedProxies.
func (a *authenticator) fromTrustedProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	return slices.ContainsFunc(a.auth.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(addr) })
}

// clientAddress is the address a request came from: the proxy's
// X-Forwarded-For (its last entry, the one the proxy added) when r comes
// from a trusted proxy, else r's peer. Sign-in backoff counts failures by it.
func (a *authenticator) clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if a.fromTrustedProxy(r) {
		forwarded := r.Header.Values("X-Forwarded-For")
		if len(forwarded) > 0 {
			last := forwarded[len(forwarded)-1]
			if addr := strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:]); addr != "" {
				return addr
			}
		}
	}
	return host
}

// checkPassword reports whether name and password match a user.
func (a *authenticator) checkPassword(name, password string) bool {
	u, ok := a.auth.Users[name]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(a.dummyHash, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) == nil
}

// newSession is the cookie value for name: name, expiry and their MAC.
func (a *authenticator) newSession(name string) (value string, expires time.Time) {
	expires = a.now().Add(a.auth.SessionTTL)
	payload := base64.RawURLEncoding.EncodeToString([]byte(name)) + "." + strconv.FormatInt(expires.Unix(), 10)
	return payload + "." + a.mac(payload), expires
}

// sessionUser checks r's session cookie and returns its user.
func (a *authenticator) sessionUser(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 {
		return "", false
	}
	payload, sig := c.Value[:i], c.Value[i+1:]
	if !hmac.Equal([]byte(sig), []byte(a.mac(payload))) {
		return "", false
	}
	encName, expiry, ok := strings.Cut(payload, ".")
	if !ok {
		return "", false
	}
	unix, err := strconv.ParseInt(expiry, 10, 64)
	if err != nil || a.now().Unix() >= unix {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(encName)
	if err != nil {
		return "", false
	}
	return string(name), true
}

func (a *authenticator) mac(payload string) string {
	m := hmac.New(sha256.New, a.auth.SessionKey)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
