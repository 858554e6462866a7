package bookie

import (
	"fmt"
	"io"
	"net/http"
)

// maxFailpointBody bounds a PUT to the failpoint endpoint.
const maxFailpointBody = 64 << 10

// SetFailpoints replaces the bookie's failpoints with fp while it runs: a
// disk fault switched on, off or changed. Adds in flight are safe: a write
// or sync already past its check finishes as it began, and every later one
// sees the new set. It fails with ErrFailpointsFixed unless the bookie was
// started with a failpoint endpoint, since only then does its journal run
// on a FaultFS.
func (b *Bookie) SetFailpoints(fp Failpoints) error {
	if b.cfg.FailpointEndpoint == "" {
		return fmt.Errorf("%w: it was started without a failpoint endpoint", ErrFailpointsFixed)
	}
	if fp.JournalSyncDelay < 0 || fp.JournalSyncDelay > MaxSyncDelay {
		return fmt.Errorf("%w: sync delay %s out of range 0..%s", ErrFailpoint, fp.JournalSyncDelay, MaxSyncDelay)
	}
	if err := b.failpoints.set(fp); err != nil {
		return err
	}
	b.log.Warn("failpoints switched", "failpoints", fp.String())
	return nil
}

// Failpoints is what is armed now; a counted fault (@n) shows how many
// operations still succeed before it fires.
func (b *Bookie) Failpoints() Failpoints { return b.failpoints.current() }

// FailpointAddr is the failpoint endpoint's listener address, "" without
// one.
func (b *Bookie) FailpointAddr() string {
	if b.failpointLn == nil {
		return ""
	}
	return b.failpointLn.Addr().String()
}

// failpointHandler serves /failpoints. Every answer that succeeds is the
// armed set, in ParseFailpoints' syntax, on one line ("" when none):
//
//	GET    /failpoints            what is armed
//	PUT    /failpoints  <spec>    replace it with spec (POST is the same)
//	DELETE /failpoints            clear it
//
// A spec that does not parse is a 400 naming what is wrong.
func (b *Bookie) failpointHandler() http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, b.Failpoints())
	}
	set := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFailpointBody))
		if err != nil {
			http.Error(w, fmt.Sprintf("read the failpoint specification: %v", err), http.StatusBadRequest)
			return
		}
		fp, err := ParseFailpoints(string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := b.SetFailpoints(fp); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		reply(w)
	}
	mux.HandleFunc("GET /failpoints", func(w http.ResponseWriter, _ *http.Request) { reply(w) })
	mux.HandleFunc("PUT /failpoints", set)
	mux.HandleFunc("POST /failpoints", set)
	mux.HandleFunc("DELETE /failpoints", func(w http.ResponseWriter, _ *http.Request) {
		if err := b.SetFailpoints(NoFailpoints()); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		reply(w)
	})
	return mux
}
