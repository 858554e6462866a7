package bkproto

import (
	"encoding/json"
	"fmt"
	"net/url"
)

// RackInfo is what an operator set for one bookie through Pulsar's
// racks-info admin API (`pulsar-admin bookies set-bookie-rack`), at
// RackInfoKey(region, address):
//
//	{"v":1,"group":"<group>","rack":"<rack>","hostname":"<hostname>"}
//
// It outlives the bookie's registration, as Pulsar's rack map does: it
// describes where a machine stands, not whether it runs. The ledger client
// puts the bookie registered at that address in Group, and takes Rack over
// the rack the bookie registered with its --rack flag.
type RackInfo struct {
	V        int    `json:"v"`
	Group    string `json:"group"`
	Rack     string `json:"rack"`
	Hostname string `json:"hostname"`
}

// Marshal encodes i with V set to the current version.
func (i RackInfo) Marshal() []byte {
	i.V = 1
	b, err := json.Marshal(i)
	if err != nil {
		panic(err) // a struct of strings and an int
	}
	return b
}

// ParseRackInfo decodes a rack info value; an unknown version, or one
// without a group, is refused rather than half-understood.
func ParseRackInfo(b []byte) (RackInfo, error) {
	var i RackInfo
	if err := json.Unmarshal(b, &i); err != nil {
		return RackInfo{}, fmt.Errorf("bkproto: bookie rack info: %w", err)
	}
	if i.V != 1 {
		return RackInfo{}, fmt.Errorf("bkproto: bookie rack info version %d, want 1", i.V)
	}
	if i.Group == "" {
		return RackInfo{}, fmt.Errorf("bkproto: bookie rack info lacks a group: %s", b)
	}
	return i, nil
}

// RackInfoPrefix is the prefix of region's rack infos, one per bookie
// address.
func RackInfoPrefix(region string) string { return regionPrefix(region) + "bookie-racks/" }

// RackInfoKey is the rack info key of the bookie at address (host:port,
// as Pulsar names bookies in racks-info).
func RackInfoKey(region, address string) string {
	return RackInfoPrefix(region) + url.PathEscape(address)
}
