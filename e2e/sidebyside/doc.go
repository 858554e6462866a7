// Package sidebyside measures Meridian and NATS JetStream on this machine
// in one run, pinned to the same cores, and writes the results (a table
// and PNG plots per suite) into docs/BENCHMARKS.md. It is a module of its
// own, so that nats-server and nats.go stay out of Meridian's module. Run
// every suite with
//
//	cd e2e/sidebyside && go test -mod=mod -tags e2e -count=1 -timeout 120m -run TestSideBySide -v .
//
// or one suite with -run TestSideBySide/<suite>. Each suite rewrites only
// its own part of docs/BENCHMARKS.md (between its markers; see report.go).
package sidebyside
