package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The permission verbs of `meridian admin`: granting a role produce and
// consume on a namespace or a topic, revoking it, and listing the grants;
// and a namespace's subscription permissions (the roles that may use one
// subscription).

// grantFlags are grant-permission's flags.
type grantFlags struct {
	role    string
	actions []string
}

func (f *grantFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.role, "role", "", "the role to grant to (required)")
	cmd.Flags().StringSliceVar(&f.actions, "actions", nil, "comma-separated actions: produce, consume (required)")
}

// grant is the role and the actions the flags give.
func (f *grantFlags) grant() (string, []utils.AuthAction, error) {
	if f.role == "" || len(f.actions) == 0 {
		return "", nil, errors.New("give --role and --actions (produce, consume)")
	}
	acts := make([]utils.AuthAction, 0, len(f.actions))
	for _, s := range f.actions {
		act, err := utils.ParseAuthAction(strings.TrimSpace(s))
		if err != nil {
			return "", nil, fmt.Errorf("--actions: %w", err)
		}
		acts = append(acts, act)
	}
	return f.role, acts, nil
}

// roleFlag is revoke-permission's --role.
func roleFlag(cmd *cobra.Command, role *string) {
	cmd.Flags().StringVar(role, "role", "", "the role to revoke (required)")
}

func (a *adminCLI) grantCommand() *cobra.Command {
	var f grantFlags
	cmd := a.verb("grant-permission NAMESPACE", "Let a role produce and/or consume in a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		role, acts, err := f.grant()
		if err != nil {
			return err
		}
		return c.Namespaces().GrantNamespacePermissionWithContext(ctx, ns, role, acts)
	})
	f.register(cmd)
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
	roleFlag(cmd, &role)
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
		return p.permissions(perms)
	})
}

// permissions prints roles and their actions, a role a row.
func (p *printer) permissions(perms map[string][]utils.AuthAction) error {
	if perms == nil {
		perms = map[string][]utils.AuthAction{}
	}
	rows := make([][]string, 0, len(perms))
	for _, r := range sortedKeys(perms) {
		acts := make([]string, 0, len(perms[r]))
		for _, act := range perms[r] {
			acts = append(acts, act.String())
		}
		rows = append(rows, []string{r, joinOrNone(acts)})
	}
	return p.table(perms, []string{"ROLE", "ACTIONS"}, rows)
}

func (a *adminCLI) grantTopicCommand() *cobra.Command {
	var f grantFlags
	cmd := a.topicVerb("grant-permission TOPIC", "Let a role produce and/or consume on one topic", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		role, acts, err := f.grant()
		if err != nil {
			return err
		}
		return c.Topics().GrantPermissionWithContext(ctx, t, role, acts)
	})
	f.register(cmd)
	return cmd
}

func (a *adminCLI) revokeTopicCommand() *cobra.Command {
	var role string
	cmd := a.topicVerb("revoke-permission TOPIC", "Take a role's permissions on a topic away (those granted on the topic, not its namespace's)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		if role == "" {
			return errors.New("give --role")
		}
		return c.Topics().RevokePermissionWithContext(ctx, t, role)
	})
	roleFlag(cmd, &role)
	return cmd
}

func (a *adminCLI) topicPermissionsCommand() *cobra.Command {
	return a.topicVerb("permissions TOPIC", "Show the roles that may use a topic and their actions (its own grants and its namespace's)", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		perms, err := c.Topics().GetPermissionsWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.permissions(perms)
	})
}

func (a *adminCLI) grantSubscriptionCommand() *cobra.Command {
	var (
		sub   string
		roles []string
	)
	cmd := a.verb("grant-subscription-permission NAMESPACE", "Let only the given roles use a subscription in a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		if sub == "" || len(roles) == 0 {
			return errors.New("give --subscription and --roles")
		}
		return c.Namespaces().GrantSubPermissionWithContext(ctx, ns, sub, roles)
	})
	cmd.Flags().StringVar(&sub, "subscription", "", "the subscription (required)")
	cmd.Flags().StringSliceVar(&roles, "roles", nil, "comma-separated roles (required)")
	return cmd
}

func (a *adminCLI) revokeSubscriptionCommand() *cobra.Command {
	var sub, role string
	cmd := a.verb("revoke-subscription-permission NAMESPACE", "Take a role's permission on a subscription away", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		if sub == "" || role == "" {
			return errors.New("give --subscription and --role")
		}
		return c.Namespaces().RevokeSubPermissionWithContext(ctx, ns, sub, role)
	})
	cmd.Flags().StringVar(&sub, "subscription", "", "the subscription (required)")
	roleFlag(cmd, &role)
	return cmd
}

func (a *adminCLI) subscriptionPermissionsCommand() *cobra.Command {
	return a.verb("subscription-permission NAMESPACE", "Show the roles each subscription of a namespace is limited to", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		perms, err := c.Namespaces().GetSubPermissionsWithContext(ctx, ns)
		if err != nil {
			return err
		}
		if perms == nil {
			perms = map[string][]string{}
		}
		rows := make([][]string, 0, len(perms))
		for _, s := range sortedKeys(perms) {
			rows = append(rows, []string{s, joinOrNone(perms[s])})
		}
		return p.table(perms, []string{"SUBSCRIPTION", "ROLES"}, rows)
	})
}
