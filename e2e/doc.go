// Package e2e holds Meridian's multi-process end-to-end tests: they build the
// meridian binary, run its commands as separate processes on loopback ports,
// inject faults by killing processes by PID, and check what clients see.
// They run only with `-tags e2e`, because they are slow.
package e2e
