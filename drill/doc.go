// Package drill rehearses the loss of a region under real load and reports,
// from what real clients saw, what the loss cost: RPO, RTO, duplicates,
// order and the fail back (`meridian drill`, issue 31).
//
// A drill runs in phases (warm-up, cut, failover, outage, restore, fail
// back, drain) on topics of its own under a prefix in the namespace. Its
// workload is pulsar-client-go producers and consumers on a service URL
// that lists every region; a Recorder keeps every send, receipt, delivery
// and ack with its time and region. Analyze turns that history and the
// timeline into Figures, Judge weighs them against Thresholds, and the
// report is written as report.json and a self-contained report.html.
//
// The cut is either a fence (Cut isolate: the lost region is cut off for
// the drill's topics only, through the admin API's fences, held under a
// TTL that the drill renews, so a killed drill's fence lapses by itself)
// or the operator's own commands (Cut command). The switch of the active
// region goes through a topic-level active region for the drill's topics.
//
// Files:
//
//	config.go    Config, its defaults and Validate
//	admin.go     the admin REST calls a drill makes (Admin) and their HTTP implementation
//	history.go   the Recorder and the history it keeps
//	where.go     which region a client is attached to, from the client's own log
//	workload.go  the producers and consumers
//	analysis.go  Figures from a history, Thresholds and the Verdict
//	report.go    report.json and report.html
//	progress.go  the live display
//	run.go       the phases, the cut, signals and cleanup
package drill
