package bkproto

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// Registration is the value a live bookie keeps, under a lease, at
// BookieKey(region, id) (DESIGN §3). The ledger client lists these to choose
// ensembles; a bookie with ReadOnly set must not be chosen for new writes. Its
// JSON form is exactly
//
//	{"v":1,"id":"<id>","address":"host:port","rack":"<rack or empty>","readOnly":false}
type Registration struct {
	V        int    `json:"v"`
	ID       string `json:"id"`
	Address  string `json:"address"`
	Rack     string `json:"rack"`
	ReadOnly bool   `json:"readOnly"`
}

// RegistrationVersion is the current value of Registration.V.
const RegistrationVersion = 1

// Marshal encodes r with V set to RegistrationVersion.
func (r Registration) Marshal() []byte {
	r.V = RegistrationVersion
	b, err := json.Marshal(r)
	if err != nil {
		// Marshalling a struct of strings and a bool cannot fail.
		panic(err)
	}
	return b
}

// ParseRegistration decodes a registration value. A value of a later version
// is refused rather than half-understood.
func ParseRegistration(b []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(b, &r); err != nil {
		return Registration{}, fmt.Errorf("bkproto: bookie registration: %w", err)
	}
	if r.V != RegistrationVersion {
		return Registration{}, fmt.Errorf("bkproto: bookie registration version %d, want %d", r.V, RegistrationVersion)
	}
	if r.ID == "" || r.Address == "" {
		return Registration{}, fmt.Errorf("bkproto: bookie registration lacks id or address: %s", b)
	}
	return r, nil
}

func regionPrefix(region string) string {
	return "/meridian/regions/" + url.PathEscape(region) + "/"
}

// BookiesPrefix is the prefix under which region's bookies register.
func BookiesPrefix(region string) string { return regionPrefix(region) + "bookies/" }

// BookieKey is the registration key of one bookie.
func BookieKey(region, bookieID string) string {
	return BookiesPrefix(region) + url.PathEscape(bookieID)
}

// LedgersPrefix is the prefix under which region's ledger metadata lives.
func LedgersPrefix(region string) string { return regionPrefix(region) + "ledgers/" }

// LedgerKey is the metadata key of one ledger: its id in decimal. Bookies
// garbage-collect a local ledger once this key is gone, so the ledger client
// must create exactly this key before its first add.
func LedgerKey(region string, ledgerID int64) string {
	return LedgersPrefix(region) + strconv.FormatInt(ledgerID, 10)
}

// ParseLedgerKey returns the ledger id of a key under LedgersPrefix(region).
func ParseLedgerKey(region, key string) (int64, bool) {
	return ParseIDKey(LedgersPrefix(region), key)
}
