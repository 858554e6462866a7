package topology

// MaxRegionNumber is the highest region number. Each region has a number,
// assigned once in the global store (global.Store.RegionNumber) and never
// changed, that its ledger ids carry in their high bits so that message
// ids are unique across regions (cluster/ledger's LedgerID, where the bits
// are laid out). Numbers run from 1; 0 marks ids made before regions had
// numbers.
const MaxRegionNumber = 1<<9 - 1
