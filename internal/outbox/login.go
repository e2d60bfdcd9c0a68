package outbox

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Outcomes of a sign-in, the label of outpost_central_signins_total.
const (
	signInSucceeded = "succeeded"
	signInFailed    = "failed"
	signInThrottled = "throttled"
	signInRefused   = "refused"
)

// newSignInCounter counts sign-ins by outcome, registered in reg when set.
func newSignInCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outpost_central_signins_total",
		Help: "Sign-ins on the outbox page's form by outcome: succeeded, failed (wrong name or password), throttled (refused unchecked after repeated failures) or refused (a user limited to other regions than the page's central serves).",
	}, []string{"outcome"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("outbox page: register sign-in metric: %w", err)
	}
	return c, nil
}

// require serves next to requests whose identity has at least role and may
// use this region's page (identity.regionRefusal); others are sent to the
// login form (a GET with users configured), or refused.
func (h *handler) require(role Role, next func(http.ResponseWriter, *http.Request, identity)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.auth.identify(r)
		refusal := id.regionRefusal(h.opts.Region.Name)
		switch {
		case !ok && r.Method == http.MethodGet && len(h.opts.Auth.Users) > 0:
			http.Redirect(w, r, pagePath(r)+"login", http.StatusSeeOther)
		case !ok && len(h.opts.Auth.Users) > 0:
			http.Error(w, "not signed in: sign in at "+pagePath(r)+"login", http.StatusUnauthorized)
		case !ok:
			http.Error(w, "not signed in: this page is served through an authenticating proxy; open it through the proxy", http.StatusUnauthorized)
		case refusal != "":
			http.Error(w, refusal, http.StatusForbidden)
		case role == RoleOperator && !id.CanAct():
			http.Error(w, fmt.Sprintf("%s is a %s: retry, discard and changes to lists need the operator role", id.Name, id.Role), http.StatusForbidden)
		default:
			next(w, r, id)
		}
	})
}

// loginForm shows the sign-in form.
func (h *handler) loginForm(w http.ResponseWriter, r *http.Request) {
	renderLogin(w, http.StatusOK, "")
}

// login checks the user name and password, starts a session and goes to
// the page; a wrong pair shows the form again with 401. After repeated
// failures for the name or from the address it answers 429 without
// checking the password (signInThrottle), unknown names alike.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "read form: "+err.Error(), http.StatusBadRequest)
		return
	}
	name, password := strings.TrimSpace(r.PostForm.Get("user")), r.PostForm.Get("password")
	if !utf8.ValidString(name) || len(name) > maxOperatorChars {
		renderLogin(w, http.StatusUnauthorized, "Wrong user name or password.")
		return
	}
	addr := h.auth.clientAddress(r)
	userKey, addrKey := "user "+name, "address "+addr
	if wait := h.throttle.wait(userKey, addrKey); wait > 0 {
		h.signIns.WithLabelValues(signInThrottled).Inc()
		h.log.Warn("outbox sign-in throttled", zap.String("user", name), zap.String("address", addr), zap.Duration("wait", wait))
		seconds := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(seconds))
		renderLogin(w, http.StatusTooManyRequests, fmt.Sprintf("Too many wrong sign-ins for this name or from this address: try again in %d seconds.", seconds))
		return
	}
	if len(password) > 72 || !h.auth.checkPassword(name, password) {
		failures := h.throttle.fail(userKey, addrKey)
		h.signIns.WithLabelValues(signInFailed).Inc()
		h.log.Warn("outbox sign-in failed", zap.String("user", name), zap.String("address", addr), zap.Int("failuresInARow", failures))
		renderLogin(w, http.StatusUnauthorized, "Wrong user name or password.")
		return
	}
	h.throttle.succeed(userKey)
	if refusal := h.userRegionRefusal(name); refusal != "" {
		h.signIns.WithLabelValues(signInRefused).Inc()
		h.log.Warn("outbox sign-in refused: another region's user", zap.String("user", name), zap.String("address", addr))
		renderLogin(w, http.StatusForbidden, refusal)
		return
	}
	h.signIns.WithLabelValues(signInSucceeded).Inc()
	value, expires := h.auth.newSession(name)
	base := pagePath(r)
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: value, Path: base, Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, base, http.StatusSeeOther)
}

// userRegionRefusal says why the user name may not sign in to this
// region's page, "" when they may.
func (h *handler) userRegionRefusal(name string) string {
	u := h.opts.Auth.Users[name]
	return identity{Name: name, Regions: u.Regions}.regionRefusal(h.opts.Region.Name)
}

// logout ends the session.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	base := pagePath(r)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: base, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, base+"login", http.StatusSeeOther)
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Outpost outbox</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 3rem auto; max-width: 22rem; color: #1d2733; background: #f6f7f9; }
form { background: #fff; border: 1px solid #d9dee5; border-radius: 6px; padding: 1rem 1.2rem; display: flex; flex-direction: column; gap: .6rem; }
label { display: flex; flex-direction: column; color: #5b6675; }
.err { background: #fdecec; border: 1px solid #e39a9a; padding: .5rem .8rem; border-radius: 6px; }
</style>
</head>
<body>
<h1>Outpost outbox</h1>
{{if .}}<p class="err" role="alert">{{.}}</p>{{end}}
<form method="post" action="login">
  <label>User<input name="user" autocomplete="username" required autofocus></label>
  <label>Password<input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit" id="sign-in">Sign in</button>
</form>
</body>
</html>
`))

func renderLogin(w http.ResponseWriter, code int, message string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(code)
	_ = loginTemplate.Execute(w, message)
}
