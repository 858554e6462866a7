// Package chart checks deploy/helm/meridian, the Helm chart of one region,
// without a cluster. It renders the chart with Helm's own Go library for
// the default values, for each release of the three-region example
// (deploy/helm/examples) and for every tls and auth value on
// (testdata/secure.yaml), decodes every object strictly into its
// k8s.io/api type (the PodMonitor into the prometheus-operator's), so that
// a misspelt or misplaced field fails, and checks what the chart names
// against the meridian binary built from this repository: each container's
// command and every flag it sets (from the binary's cobra tree, through
// cobra's own completion command), each MERIDIAN_FLAG_ variable, each
// Pulsar setting (PULSAR_PREFIX_, run past the binary), each file a
// setting names (in a read-only mount of a Secret), the image
// and its ports (deploy/build-image.sh and deploy/Containerfile), and each
// probe and scrape path (GET from running processes started with the
// chart's own settings). The init Job's commands run against a standalone.
//
// It is a module of its own, as e2e/deploy is, so that Helm's and
// Kubernetes' modules stay out of Meridian's. Run it with
//
//	cd e2e/chart && go test ./...
package chart
