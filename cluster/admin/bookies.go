package admin

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
)

// The region's bookies and their repair (`meridian admin bookies`), all a
// superuser's, as Pulsar's /admin/v2/bookies endpoints are:
//
//	GET    /admin/v2/bookies/all                      Pulsar's: {"bookies":[{"bookieId":...}]}
//	GET    /admin/v2/bookies/racks-info               Pulsar's: {"<group>":{"<address>":{"rack","hostname"}}}
//	GET    /admin/v2/bookies/racks-info/{bookie}      one bookie's {"rack","hostname"}
//	POST   /admin/v2/bookies/racks-info/{bookie}?group=G   body {"rack","hostname"}: put the bookie in group G
//	DELETE /admin/v2/bookies/racks-info/{bookie}      back to group "default" and its own --rack
//	GET    /admin/v2/bookies/list                     every bookie: state, rack, ledger count
//	GET    /admin/v2/bookies/under-replicated         the under-replicated ledgers
//	POST   /admin/v2/bookies/{bookie}/decommission    start draining; answers the progress
//	GET    /admin/v2/bookies/{bookie}/decommission    the progress
//	POST   /admin/v2/bookies/{bookie}/lost            re-replicate now, without the delay
//	DELETE /admin/v2/bookies/{bookie}/state           cancel a decommission or a lost mark
//	GET    /admin/v2/bookies/autorecovery             {"enabled":bool}
//	POST   /admin/v2/bookies/autorecovery/enable      resume recovery
//	POST   /admin/v2/bookies/autorecovery/disable     pause it (maintenance)

// rawBookie is Pulsar's shape (BookiesClusterInfo).
type rawBookie struct {
	BookieID string `json:"bookieId"`
}

// autoRecoveryStatus is the answer of GET /admin/v2/bookies/autorecovery.
type autoRecoveryStatus struct {
	Enabled bool `json:"enabled"`
}

func (h *handler) routeBookies() {
	adm := h.cfg.Bookies
	if adm == nil {
		return
	}
	one := oneBookie{}
	defer h.handleOneBookie(one)
	h.handle("GET /admin/v2/bookies/all", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		regs, err := adm.Registered(r.Context())
		if err != nil {
			return err
		}
		out := struct {
			Bookies []rawBookie `json:"bookies"`
		}{Bookies: []rawBookie{}}
		for _, b := range regs {
			out.Bookies = append(out.Bookies, rawBookie{BookieID: b.Address})
		}
		return ok(w, out)
	})
	h.handle("GET /admin/v2/bookies/racks-info", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		racks, err := adm.Racks(r.Context())
		if err != nil {
			return err
		}
		return ok(w, racks)
	})
	one["GET /admin/v2/bookies/racks-info/{bookie}"] = route(func(w http.ResponseWriter, r *http.Request) error {
		racks, err := adm.Racks(r.Context())
		if err != nil {
			return err
		}
		address := r.PathValue("bookie")
		for _, group := range racks {
			if rack, found := group[address]; found {
				return ok(w, rack)
			}
		}
		return pulsarReason{ErrNotFound, "Bookie address not found: " + address}
	})
	one["POST /admin/v2/bookies/racks-info/{bookie}"] = route(func(w http.ResponseWriter, r *http.Request) error {
		query := r.URL.Query()
		if !query.Has("group") {
			// Pulsar's answer, before the body is read.
			return pulsarReason{ErrPrecondition, "Bookie 'group' parameters is missing"}
		}
		var rack autorecovery.BookieRack
		if err := h.mustReadJSON(r, &rack); err != nil {
			return err
		}
		if err := adm.SetRack(r.Context(), r.PathValue("bookie"), query.Get("group"), rack); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	one["DELETE /admin/v2/bookies/racks-info/{bookie}"] = route(func(w http.ResponseWriter, r *http.Request) error {
		if err := adm.DeleteRack(r.Context(), r.PathValue("bookie")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	h.handle("GET /admin/v2/bookies/list", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		list, err := adm.Bookies(r.Context())
		if err != nil {
			return err
		}
		return ok(w, list)
	})
	h.handle("GET /admin/v2/bookies/under-replicated", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		list, err := adm.UnderReplicated(r.Context())
		if err != nil {
			return err
		}
		return ok(w, list)
	})
	one["POST /admin/v2/bookies/{bookie}/decommission"] = route(func(w http.ResponseWriter, r *http.Request) error {
		d, err := adm.Decommission(r.Context(), r.PathValue("bookie"))
		if err != nil {
			return err
		}
		return ok(w, d)
	})
	one["GET /admin/v2/bookies/{bookie}/decommission"] = route(func(w http.ResponseWriter, r *http.Request) error {
		d, err := adm.DecommissionStatus(r.Context(), r.PathValue("bookie"))
		if err != nil {
			return err
		}
		return ok(w, d)
	})
	one["POST /admin/v2/bookies/{bookie}/lost"] = route(func(w http.ResponseWriter, r *http.Request) error {
		if err := adm.MarkLost(r.Context(), r.PathValue("bookie")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	one["DELETE /admin/v2/bookies/{bookie}/state"] = route(func(w http.ResponseWriter, r *http.Request) error {
		if err := adm.ClearState(r.Context(), r.PathValue("bookie")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	h.handle("GET /admin/v2/bookies/autorecovery", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		paused, err := adm.Paused(r.Context())
		if err != nil {
			return err
		}
		return ok(w, autoRecoveryStatus{Enabled: !paused})
	})
	for verb, pause := range map[string]bool{"enable": false, "disable": true} {
		h.handle("POST /admin/v2/bookies/autorecovery/"+verb, opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
			if err := adm.SetPaused(r.Context(), pause); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
	}
}

// oneBookie is the routes of one bookie, by pattern: Pulsar's
// racks-info/{bookie} and Meridian's {bookie}/<resource>.
type oneBookie map[string]route

// handleOneBookie serves the routes of one bookie. http.ServeMux refuses
// racks-info/{bookie} beside {bookie}/decommission (racks-info/decommission
// would match both, and neither is more specific), so one pattern a method,
// /admin/v2/bookies/{first}/{second}, serves them all: racks-info first
// names Pulsar's route, anything else a bookie. Each route is recorded by
// its own pattern, as if served alone.
func (h *handler) handleOneBookie(routes oneBookie) {
	methods := map[string]bool{}
	for pattern := range routes {
		h.routes = append(h.routes, routeOp{pattern, opSuperUser})
		method, _, _ := strings.Cut(pattern, " ")
		methods[method] = true
	}
	for method := range methods {
		h.serve(method+" /admin/v2/bookies/{first}/{second}", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
			first, second := r.PathValue("first"), r.PathValue("second")
			pattern, bookie := method+" /admin/v2/bookies/{bookie}/"+second, first
			if first == "racks-info" {
				pattern, bookie = method+" /admin/v2/bookies/racks-info/{bookie}", second
			}
			fn, found := routes[pattern]
			if !found {
				return fmt.Errorf("%w: no endpoint %s %s", ErrNotFound, r.Method, r.URL.Path)
			}
			r.SetPathValue("bookie", bookie)
			return fn(w, r)
		})
	}
}
