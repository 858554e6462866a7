package global

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meridian-mq/meridian/topology"
)

// Bootstrap is what `meridian standalone` and `meridian dev` ensure exists
// before they serve: the regions they run, Pulsar's default tenant
// ("public", allowed in every given region) and namespace ("public/default",
// replicating among every given region).
type Bootstrap struct {
	// Clusters are the regions and their URLs, keyed by region name. At
	// least one.
	Clusters map[string]ClusterData
}

// Ensure makes the bootstrap state exist, idempotently and without undoing
// an operator's later changes:
//   - a missing cluster is created; an existing one is left as it is (its
//     URLs may have been edited on purpose), so restarting on the same data
//     never rewrites it;
//   - tenant public is created allowing all the clusters, or, if it exists,
//     gains any of them it does not allow yet;
//   - namespace public/default is created replicating to all the clusters,
//     or, if it exists, gains any of them it does not replicate to yet.
//
// Creating is create-if-absent, so two processes bootstrapping at once both
// succeed: the loser of a create finds the winner's record and merges into
// it.
func (s *Store) Ensure(ctx context.Context, b Bootstrap) error {
	if len(b.Clusters) == 0 {
		return fmt.Errorf("%w: bootstrap needs at least one cluster", ErrInvalidCluster)
	}
	names := make([]string, 0, len(b.Clusters))
	for name, d := range b.Clusters {
		names = append(names, name)
		if _, err := s.CreateCluster(ctx, name, d); err != nil && !errors.Is(err, ErrExists) {
			return fmt.Errorf("bootstrap cluster %s: %w", name, err)
		}
	}
	slices.Sort(names)
	missing := func(have []string) []string {
		var out []string
		for _, n := range names {
			if !slices.Contains(have, n) {
				out = append(out, n)
			}
		}
		return out
	}

	tenant := topology.DefaultTenant
	_, err := s.CreateTenant(ctx, tenant, TenantInfo{AllowedClusters: names})
	if errors.Is(err, ErrExists) {
		_, _, err = s.UpdateTenant(ctx, tenant, func(t *TenantInfo) error {
			t.AllowedClusters = append(t.AllowedClusters, missing(t.AllowedClusters)...)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("bootstrap tenant %s: %w", tenant, err)
	}

	ns := topology.DefaultNamespace
	_, err = s.CreateNamespace(ctx, tenant, ns, Policies{ReplicationClusters: names})
	if errors.Is(err, ErrExists) {
		_, _, err = s.UpdateNamespace(ctx, tenant, ns, func(p *Policies) error {
			p.ReplicationClusters = append(p.ReplicationClusters, missing(p.ReplicationClusters)...)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("bootstrap namespace %s/%s: %w", tenant, ns, err)
	}
	return nil
}
