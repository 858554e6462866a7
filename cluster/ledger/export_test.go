package ledger

// LedgerIDCounterKey lets tests advance a region's counter as ledgers made
// before region numbers existed would have.
var LedgerIDCounterKey = ledgerIDCounterKey
