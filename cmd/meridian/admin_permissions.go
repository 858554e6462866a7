package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The permission verbs of `meridian admin`: granting a role produce and
// consume on a namespace, revoking it, and listing the grants.

func (a *adminCLI) grantCommand() *cobra.Command {
	var role string
	var actions []string
	cmd := a.verb("grant-permission NAMESPACE", "Let a role produce and/or consume in a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		if role == "" || len(actions) == 0 {
			return errors.New("give --role and --actions (produce, consume)")
		}
		acts := make([]utils.AuthAction, 0, len(actions))
		for _, s := range actions {
			act, err := utils.ParseAuthAction(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("--actions: %w", err)
			}
			acts = append(acts, act)
		}
		return c.Namespaces().GrantNamespacePermissionWithContext(ctx, ns, role, acts)
	})
	cmd.Flags().StringVar(&role, "role", "", "the role to grant to (required)")
	cmd.Flags().StringSliceVar(&actions, "actions", nil, "comma-separated actions: produce, consume (required)")
	return cmd
}

func (a *adminCLI) revokeCommand() *cobra.Command {
	var role string
	cmd := a.verb("revoke-permission NAMESPACE", "Take a role's permissions on a namespace away", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		if role == "" {
			return errors.New("give --role")
		}
		return c.Namespaces().RevokeNamespacePermissionWithContext(ctx, ns, role)
	})
	cmd.Flags().StringVar(&role, "role", "", "the role to revoke (required)")
	return cmd
}

func (a *adminCLI) permissionsCommand() *cobra.Command {
	return a.verb("permissions NAMESPACE", "Show the roles granted on a namespace and their actions", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		perms, err := c.Namespaces().GetNamespacePermissionsWithContext(ctx, ns)
		if err != nil {
			return err
		}
		if perms == nil {
			perms = map[string][]utils.AuthAction{}
		}
		roles := make([]string, 0, len(perms))
		for r := range perms {
			roles = append(roles, r)
		}
		sort.Strings(roles)
		rows := make([][]string, 0, len(roles))
		for _, r := range roles {
			acts := make([]string, 0, len(perms[r]))
			for _, act := range perms[r] {
				acts = append(acts, act.String())
			}
			rows = append(rows, []string{r, joinOrNone(acts)})
		}
		return p.table(perms, []string{"ROLE", "ACTIONS"}, rows)
	})
}
