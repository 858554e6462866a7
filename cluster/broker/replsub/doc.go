// Package replsub is the logic of replicated subscriptions, with no I/O:
// what a subscription's state is when it travels between regions, how a
// region names its entries so that the state means the same thing
// everywhere, and the rules by which states meet. The broker drives it
// (cluster/broker/replsubs.go): it reads the topic's entries into an
// Index, exports its subscriptions' States to the global store, and
// applies the other regions' States it reads back.
//
// # Identity, not positions
//
// A position (ledger, entry) means nothing outside its region: two regions
// store the same messages in different ledgers, and entries of two origins
// interleave differently in each. So every entry is named by where it was
// first written, its Identity: the origin region, the origin topic's
// incarnation (its managed-ledger record's creation revision, so that a
// topic deleted and created again, whose offsets restart at 0, is a new
// origin) and the topic-wide offsets First..Last of its messages there (a
// batch of n messages spans n offsets). A locally published entry's
// identity is the local region, the topic's incarnation and its
// BrokerEntryMetadata index; a replicated one carries its identity in
// __MERIDIAN_REPL_SOURCE and replicated_from. The replicator sends each
// origin's entries in origin order, so within one origin the Index is
// sorted by offset in every region.
//
// # What travels
//
// A State is a subscription's consumed set in one region, per origin, as
// Ranges of offsets: the mark-delete position, individual acks and the
// acks of single messages of a batch all become offsets, and a consumed
// prefix is the first range. Every range is made of the offsets of entries
// the region stored, so a message that never reached it (kept from it by
// replicate_to, or not replicated yet) is never said to be consumed, and an
// origin the region has never stored is absent: the importer leaves such
// entries alone. Entries trimmed by retention before the Index began are
// not named either: a failover may deliver them again, never lose them.
//
// # The rules
//
//   - Acks merge by union. Two regions acking concurrently each end with
//     both sets; applying a state twice changes nothing, and a region
//     never un-acks on a merge, so states converge and a write echoed back
//     changes nothing (no ping-pong).
//   - A seek or reset replaces. Every State carries an Epoch (a counter and
//     the region that took it). A seek takes an Epoch above every one it
//     knows; a region that sees a State of a higher Epoch drops its own
//     acks and takes that State whole, then merges by union again. States
//     of a lower Epoch are stale (taken before the seek) and are ignored,
//     so a union can never bring back what a seek undid. Two seeks at once
//     in two regions: the higher counter wins, then the greater region
//     name.
//   - Bounds. A State holds at most MaxRanges ranges per origin. Past
//     that, the origin falls back to its first range, its consumed prefix
//     (what the mark-delete says), which makes the other regions redeliver
//     the acks left out rather than lose anything; Export says how many
//     origins it cut.
package replsub
