package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newProbeCommand is a container's health check. Meridian's image is FROM
// scratch, with no shell and no curl, so a health check (compose's
// healthcheck, podman's --health-cmd) can only run the binary itself:
// `meridian probe http://localhost:8080/status.html`. It is a plain GET,
// so that any endpoint of any role can be probed, etcd's /health included.
func newProbeCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe URL",
		Short: "GET a health endpoint and exit 0 on a 2xx answer, 1 otherwise (a container's health check)",
		Long: `GET URL and exit 0 when it answers 2xx, 1 otherwise (printing the status and
the start of the body). The image has no shell or curl, so this is what a
container's health check runs, e.g.
  meridian probe http://localhost:8080/status.html           # a broker
  meridian probe http://localhost:8000/api/v1/bookie/is_ready # a bookie
  meridian probe http://localhost:8001/ready                  # a replicator
  meridian probe http://localhost:2379/health                 # etcd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return probe(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// probe GETs url and returns an error unless it answers 2xx within timeout.
func probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return fmt.Errorf("probe %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
