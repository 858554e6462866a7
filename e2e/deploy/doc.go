// Package deploy checks the files of deploy/ against what a running region
// serves: the Grafana dashboard parses, the Prometheus rules parse and
// validate with Prometheus's own rulefmt, and every metric and label their
// expressions use is served. It is a module of its own, so that
// Prometheus's server module, which rulefmt comes with, and the dependency
// upgrades it asks for stay out of Meridian's module. Run it with
//
//	cd e2e/deploy && go test ./...
//
// It also checks the compose plane's file (deploy/compose/compose.yaml,
// TestComposeFile) and that docs/operations.md's alert runbook has an entry
// for every alert rule, without podman.
//
// Behind -tags e2e, TestImageDropIn builds the container image with
// deploy/build-image.sh and runs it with podman as a drop-in for Pulsar's,
// and TestComposePlane starts the compose plane's three regions with
// podman-compose and sends messages across them while a broker stops.
package deploy
