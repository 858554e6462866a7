package admin

import (
	"net/http"
)

// The region's bookies and their repair (`meridian admin bookies`), all a
// superuser's, as Pulsar's /admin/v2/bookies endpoints are:
//
//	GET    /admin/v2/bookies/all                      Pulsar's: {"bookies":[{"bookieId":...}]}
//	GET    /admin/v2/bookies/racks-info               Pulsar's: {"default":{"<address>":{"rack","hostname"}}}
//	GET    /admin/v2/bookies/list                     every bookie: state, rack, ledger count
//	GET    /admin/v2/bookies/under-replicated         the under-replicated ledgers
//	POST   /admin/v2/bookies/{bookie}/decommission    start draining; answers the progress
//	GET    /admin/v2/bookies/{bookie}/decommission    the progress
//	POST   /admin/v2/bookies/{bookie}/lost            re-replicate now, without the delay
//	DELETE /admin/v2/bookies/{bookie}/state           cancel a decommission or a lost mark
//	GET    /admin/v2/bookies/autorecovery             {"enabled":bool}
//	POST   /admin/v2/bookies/autorecovery/enable      resume recovery
//	POST   /admin/v2/bookies/autorecovery/disable     pause it (maintenance)

// rawBookie and rackInfo are Pulsar's shapes (BookiesClusterInfo,
// BookieInfo).
type rawBookie struct {
	BookieID string `json:"bookieId"`
}

type rackInfo struct {
	Rack     string `json:"rack"`
	Hostname string `json:"hostname"`
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
		regs, err := adm.Registered(r.Context())
		if err != nil {
			return err
		}
		// Pulsar groups bookies; Meridian has one group per region.
		group := make(map[string]rackInfo, len(regs))
		for _, b := range regs {
			group[b.Address] = rackInfo{Rack: b.Rack, Hostname: b.ID}
		}
		return ok(w, map[string]map[string]rackInfo{"default": group})
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
	h.handle("POST /admin/v2/bookies/{bookie}/decommission", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		d, err := adm.Decommission(r.Context(), r.PathValue("bookie"))
		if err != nil {
			return err
		}
		return ok(w, d)
	})
	h.handle("GET /admin/v2/bookies/{bookie}/decommission", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		d, err := adm.DecommissionStatus(r.Context(), r.PathValue("bookie"))
		if err != nil {
			return err
		}
		return ok(w, d)
	})
	h.handle("POST /admin/v2/bookies/{bookie}/lost", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
		if err := adm.MarkLost(r.Context(), r.PathValue("bookie")); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	h.handle("DELETE /admin/v2/bookies/{bookie}/state", opSuperUser, func(w http.ResponseWriter, r *http.Request) error {
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
