package sitedaemon

import (
	"context"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	// Store is "ok" or why the site store cannot be used.
	Store string `json:"store"`
	// Central is "reachable" or why not. A site stays ready while central
	// is unreachable: it keeps accepting work and buffers it.
	Central string `json:"central"`
	// Handoff is "ok", or why central refuses hand-offs it will accept once
	// it is set up (search attributes, namespace, permission) and what cures
	// it. The site stays ready: the rows are retried at the forward interval.
	Handoff string `json:"handoff"`
	// Role is "active"; "waiting: site held by …" while another daemon
	// with this site id acts for the site (siteHold); or "standby: the
	// active node is …" on a pair's standby (pair). Not ready unless
	// active: the API refuses new operations.
	Role string `json:"role"`
}

// healthz answers 200 while the process serves requests.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 when the site can accept work (it acts for the site and
// its store answers) and 503 when it cannot; either way it says whether
// central is reachable and whether it accepts the hand-offs.
func readyz(store *sitestore.Store, tc client.Client, fwd *Forwarder, role siteRole) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		active, described := role.describe()
		rd := Readiness{Ready: active, Store: "ok", Central: "reachable", Handoff: "ok", Role: described}
		if waiting := fwd.WaitingForCentral(); waiting != "" {
			rd.Handoff = waiting
		}
		if err := store.Ping(ctx); err != nil {
			rd.Ready, rd.Store = false, err.Error()
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			rd.Central = "unreachable (work is accepted and buffered): " + err.Error()
		}
		status := http.StatusOK
		if !rd.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, rd)
	}
}
