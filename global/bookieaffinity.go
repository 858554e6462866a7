package global

import (
	"fmt"

	"github.com/meridian-mq/meridian/topology"
)

// ExtraBookieAffinityGroup is the Extra key, in a namespace's record, of
// its BookieAffinityGroup (Pulsar's LocalPolicies.bookieAffinityGroup,
// admin path persistence/bookieAffinity).
const ExtraBookieAffinityGroup = "bookie_affinity_group"

// BookieAffinityGroup is Pulsar's BookieAffinityGroupData: the bookie group
// a namespace's new ledgers are placed in, and the group that tops it up
// when it has too few writable bookies for an ensemble. Bookies join a
// group through the racks-info admin API (pulsar-admin bookies
// set-bookie-rack --group); a bookie in none is in group "default".
type BookieAffinityGroup struct {
	Primary   string `json:"bookkeeperAffinityGroupPrimary"`
	Secondary string `json:"bookkeeperAffinityGroupSecondary,omitempty"`
}

// Validate checks that a primary group is named, as pulsar-admin requires.
func (g BookieAffinityGroup) Validate() error {
	if g.Primary == "" {
		return fmt.Errorf("%w: bookkeeperAffinityGroupPrimary must name a bookie group", ErrInvalidPolicies)
	}
	return nil
}

// Groups is g in placement's terms.
func (g BookieAffinityGroup) Groups() topology.Groups {
	return topology.Groups{Primary: g.Primary, Secondary: g.Secondary}
}

// BookieGroups are the groups a namespace with policies p places its new
// ledgers in: its BookieAffinityGroup, else none (the zero Groups). Pulsar
// keeps them per namespace only, so its topics take them from it.
func (p Policies) BookieGroups() topology.Groups {
	if g := decodeExtra(p.Extra, ExtraBookieAffinityGroup, BookieAffinityGroup.Validate); g != nil {
		return g.Groups()
	}
	return topology.Groups{}
}
