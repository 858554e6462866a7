package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	padmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/auth"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// adminCLI holds `meridian admin`'s global flags: where the admin REST API
// is and how to authenticate to it. They are pulsar-admin's flags with the
// same names, so that scripts written for pulsar-admin carry over. Every
// request goes through pulsaradmin, the REST client of pulsar-client-go:
// the CLI sends exactly what a Go program using that package sends, which
// is what the admin API is tested against.
type adminCLI struct {
	credentials
	url        string
	authPlugin string
	authParams string
	output     string
}

// newAdminCommand is `meridian admin`, the counterpart of pulsar-admin for
// tenants, namespaces, topics, clusters and brokers.
func newAdminCommand() *cobra.Command {
	a := &adminCLI{}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage clusters, tenants, namespaces and topics through the admin REST API (like pulsar-admin)",
		Long: `Manage a region through its Pulsar-compatible admin REST API, with
pulsar-admin's verbs and flags:
  meridian admin tenants create acme -r alice -c us-east
  meridian admin namespaces create acme/orders
  meridian admin namespaces grant-permission acme/orders --actions produce,consume --role bob
  meridian admin topics create-partitioned-topic persistent://acme/orders/new -p 4
  meridian admin topics stats persistent://acme/orders/new-partition-0
Results print as text (lists one item per line, records as a table, statistics
as indented JSON, as pulsar-admin prints them) or, with --output json, as
JSON. Authenticate with --token / --token-file, with --auth-plugin and
--auth-params as pulsar-admin does, or with a TLS client certificate.`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if a.output != "table" && a.output != "text" && a.output != "json" {
				return fmt.Errorf("--output %q: want table or json", a.output)
			}
			return nil
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&a.url, "admin-url", "http://localhost:8080", "the admin REST API's URL (a broker's web service URL; https:// for TLS)")
	pf.StringVar(&a.authPlugin, "auth-plugin", "", "authentication plugin: token or tls (or their org.apache.pulsar.client.impl.auth class names)")
	pf.StringVar(&a.authParams, "auth-params", "", `the plugin's parameters: for token "token:<jwt>", "file:<path>" or {"token":...}; for tls "tlsCertFile:<path>,tlsKeyFile:<path>"`)
	a.register(cmd)
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table (text, as pulsar-admin prints) or json")
	cmd.AddCommand(a.tenantsCommand(), a.namespacesCommand(), a.topicsCommand(),
		a.clustersCommand(), a.brokersCommand(), a.brokerStatsCommand())
	return cmd
}

// client makes the pulsaradmin client the flags describe. Conflicting
// credentials are an error rather than a silent choice: pulsaradmin would
// otherwise pick one of them by its own precedence.
func (a *adminCLI) client() (pulsaradmin.Client, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	c, err := pulsaradmin.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return c, nil
}

// config is the pulsaradmin configuration the flags describe.
func (a *adminCLI) config() (*pulsaradmin.Config, error) {
	u, err := url.Parse(a.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--admin-url %q: want http://host:port or https://host:port", a.url)
	}
	cfg := &pulsaradmin.Config{
		WebServiceURL:              strings.TrimSuffix(a.url, "/"),
		TLSTrustCertsFilePath:      a.trustCert,
		TLSAllowInsecureConnection: a.insecure,
		TLSCertFile:                a.certFile,
		TLSKeyFile:                 a.keyFile,
		Token:                      a.token,
		TokenFile:                  a.tokenFile,
	}
	if err := a.check(authMethod{"--auth-plugin with --auth-params", a.authPlugin != "" || a.authParams != ""}); err != nil {
		return nil, err
	}
	switch a.authPlugin {
	case "":
		if a.authParams != "" {
			return nil, errors.New("--auth-params needs --auth-plugin (token or tls)")
		}
	case auth.TokePluginShortName, auth.TokenPluginName, auth.TLSPluginShortName, auth.TLSPluginName:
		cfg.AuthPlugin, cfg.AuthParams = a.authPlugin, a.authParams
		if a.authParams == "" {
			return nil, fmt.Errorf("--auth-plugin %s needs --auth-params", a.authPlugin)
		}
	default:
		return nil, fmt.Errorf("--auth-plugin %q is not supported: use token or tls (or --token, --token-file)", a.authPlugin)
	}
	return cfg, nil
}

// restClient is a REST client with the flags' URL and credentials, as
// pulsaradmin builds it, for the requests pulsaradmin has no call for or
// whose answers its types would cut short.
func (a *adminCLI) restClient() (*rest.Client, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	provider, err := auth.GetAuthProvider(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &rest.Client{ServiceURL: cfg.WebServiceURL, VersionInfo: padmin.ReleaseVersion,
		HTTPClient: &http.Client{Timeout: padmin.DefaultHTTPTimeOutDuration, Transport: provider}}, nil
}

// rawGet GETs path (below the admin URL) and returns the body as the server
// sent it. Statistics print this way, so that every field the server
// reports shows, also those pulsaradmin's types do not know (lastError in
// the replication stats). Failures are rest.Error, as through pulsaradmin.
func (a *adminCLI) rawGet(ctx context.Context, path string, params map[string]string) ([]byte, error) {
	c, err := a.restClient()
	if err != nil {
		return nil, err
	}
	return c.GetWithQueryParamsWithContext(ctx, path, nil, params, false)
}

// topicPath is the admin API path of t's resource below it ("stats").
func topicPath(t utils.TopicName, resource string) string {
	return "/admin/v2/" + t.GetRestPath() + "/" + resource
}

// raw prints a JSON body as the server sent it, indented.
func (p *printer) raw(body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	_, err := fmt.Fprintf(p.w, "%s\n", b.Bytes())
	return err
}

// explain turns a pulsaradmin error into one that says what went wrong and
// what to do: the server's reason with its status, or the fact that nothing
// answered at --admin-url.
func (a *adminCLI) explain(err error) error {
	var re rest.Error
	if errors.As(err, &re) {
		reason := strings.TrimSpace(re.Reason)
		if reason == "" {
			reason = "no reason given"
		}
		hint := ""
		switch re.Code {
		case 401:
			hint = "; authenticate with --token, --token-file or --auth-plugin/--auth-params"
		case 403:
			hint = "; the role lacks the permission (tenant admin or superuser roles, or namespace permissions)"
		}
		return fmt.Errorf("%s (HTTP %d from %s%s)", reason, re.Code, a.url, hint)
	}
	var ue *url.Error
	var ne *net.OpError
	if errors.As(err, &ue) && errors.As(err, &ne) {
		return fmt.Errorf("cannot reach the admin API at %s: %v (is a broker serving there? set --admin-url)", a.url, ne.Err)
	}
	return err
}

// action is one verb's work, given a client and the command's arguments.
type action func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error

func (a *adminCLI) runE(fn action) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := a.client()
		if err != nil {
			return err
		}
		p := &printer{w: cmd.OutOrStdout(), json: a.output == "json"}
		if err := fn(cmd.Context(), c, p, args); err != nil {
			return a.explain(err)
		}
		return nil
	}
}

// verb builds a leaf command taking exactly nargs positional arguments,
// named by use ("get TENANT").
func (a *adminCLI) verb(use, short string, nargs int, fn action) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(nargs), RunE: a.runE(fn)}
}

func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	cmd.AddCommand(subs...)
	return cmd
}

// printer writes results as text or JSON. Commands that change something
// print nothing on success, as pulsar-admin does.
type printer struct {
	w    io.Writer
	json bool
}

// list prints names one per line, or a JSON array (never null).
func (p *printer) list(items []string) error {
	if items == nil {
		items = []string{}
	}
	if p.json {
		return p.jsonValue(items)
	}
	for _, s := range items {
		if _, err := fmt.Fprintln(p.w, s); err != nil {
			return err
		}
	}
	return nil
}

// object prints v as indented JSON in both modes: statistics and policies
// are nested records that pulsar-admin also prints as JSON.
func (p *printer) object(v any) error { return p.jsonValue(v) }

// table prints rows under a header as aligned columns, or v as JSON.
func (p *printer) table(v any, header []string, rows [][]string) error {
	if p.json {
		return p.jsonValue(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// scalar prints one value as text, or v as JSON.
func (p *printer) scalar(text string, v any) error {
	if p.json {
		return p.jsonValue(v)
	}
	_, err := fmt.Fprintln(p.w, text)
	return err
}

func (p *printer) jsonValue(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func namespaceArg(s string) (utils.NameSpaceName, error) {
	ns, err := utils.GetNamespaceName(s)
	if err != nil {
		return utils.NameSpaceName{}, fmt.Errorf("namespace %q: want tenant/namespace: %w", s, err)
	}
	return *ns, nil
}

func topicArg(s string) (utils.TopicName, error) {
	t, err := utils.GetTopicName(s)
	if err != nil {
		return utils.TopicName{}, fmt.Errorf("topic %q: want persistent://tenant/namespace/topic (or a short name): %w", s, err)
	}
	return *t, nil
}

// ---- tenants ----

func (a *adminCLI) tenantsCommand() *cobra.Command {
	list := a.verb("list", "List tenants", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		ts, err := c.Tenants().ListWithContext(ctx)
		if err != nil {
			return err
		}
		sort.Strings(ts)
		return p.list(ts)
	})
	get := a.verb("get TENANT", "Show a tenant's admin roles and allowed clusters", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		t, err := c.Tenants().GetWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.table(t, []string{"ADMIN ROLES", "ALLOWED CLUSTERS"},
			[][]string{{joinOrNone(t.AdminRoles), joinOrNone(t.AllowedClusters)}})
	})

	var roles, clusters []string
	create := a.verb("create TENANT", "Create a tenant (allowed clusters default to every cluster)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		allowed := clusters
		if len(allowed) == 0 {
			// pulsar-admin's default: the tenant may use every cluster.
			all, err := c.Clusters().ListWithContext(ctx)
			if err != nil {
				return err
			}
			allowed = all
		}
		return c.Tenants().CreateWithContext(ctx, utils.TenantData{Name: args[0], AdminRoles: nonNil(roles), AllowedClusters: allowed})
	})
	create.Flags().StringSliceVarP(&roles, "admin-roles", "r", nil, "comma-separated admin roles")
	create.Flags().StringSliceVarP(&clusters, "allowed-clusters", "c", nil, "comma-separated clusters the tenant may use (default: all)")

	var uRoles, uClusters []string
	update := &cobra.Command{Use: "update TENANT", Short: "Change a tenant's admin roles or allowed clusters (the one not given is kept)", Args: cobra.ExactArgs(1)}
	update.RunE = a.runE(func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		rolesSet, clustersSet := update.Flags().Changed("admin-roles"), update.Flags().Changed("allowed-clusters")
		if !rolesSet && !clustersSet {
			return errors.New("nothing to change: give --admin-roles and/or --allowed-clusters")
		}
		t := utils.TenantData{Name: args[0], AdminRoles: nonNil(uRoles), AllowedClusters: nonNil(uClusters)}
		if !rolesSet || !clustersSet {
			cur, err := c.Tenants().GetWithContext(ctx, args[0])
			if err != nil {
				return err
			}
			if !rolesSet {
				t.AdminRoles = nonNil(cur.AdminRoles)
			}
			if !clustersSet {
				t.AllowedClusters = nonNil(cur.AllowedClusters)
			}
		}
		return c.Tenants().UpdateWithContext(ctx, t)
	})
	update.Flags().StringSliceVarP(&uRoles, "admin-roles", "r", nil, "comma-separated admin roles (replaces the current ones)")
	update.Flags().StringSliceVarP(&uClusters, "allowed-clusters", "c", nil, "comma-separated allowed clusters (replaces the current ones)")

	del := a.verb("delete TENANT", "Delete a tenant (it must have no namespaces)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Tenants().DeleteWithContext(ctx, args[0])
	})
	return group("tenants", "Manage tenants", list, get, create, update, del)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ---- clusters ----

func (a *adminCLI) clustersCommand() *cobra.Command {
	list := a.verb("list", "List clusters (regions)", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		cs, err := c.Clusters().ListWithContext(ctx)
		if err != nil {
			return err
		}
		sort.Strings(cs)
		return p.list(cs)
	})
	get := a.verb("get CLUSTER", "Show a cluster's service URLs", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		d, err := c.Clusters().GetWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.table(d, []string{"SERVICE URL", "SERVICE URL TLS", "BROKER SERVICE URL", "BROKER SERVICE URL TLS", "PEERS"},
			[][]string{{orDash(d.ServiceURL), orDash(d.ServiceURLTls), orDash(d.BrokerServiceURL), orDash(d.BrokerServiceURLTls), joinOrNone(d.PeerClusterNames)}})
	})
	withURLs := func(use, short string, fn func(context.Context, pulsaradmin.Client, utils.ClusterData) error) *cobra.Command {
		var d utils.ClusterData
		cmd := a.verb(use, short, 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			d.Name = args[0]
			if d.ServiceURL == "" && d.ServiceURLTls == "" && d.BrokerServiceURL == "" && d.BrokerServiceURLTls == "" {
				return errors.New("give at least one of --url, --url-secure, --broker-url, --broker-url-secure")
			}
			return fn(ctx, c, d)
		})
		f := cmd.Flags()
		f.StringVar(&d.ServiceURL, "url", "", "web service URL (http://host:8080)")
		f.StringVar(&d.ServiceURLTls, "url-secure", "", "web service TLS URL (https://host:8443)")
		f.StringVar(&d.BrokerServiceURL, "broker-url", "", "broker service URL (pulsar://host:6650)")
		f.StringVar(&d.BrokerServiceURLTls, "broker-url-secure", "", "broker service TLS URL (pulsar+ssl://host:6651)")
		return cmd
	}
	create := withURLs("create CLUSTER", "Create a cluster", func(ctx context.Context, c pulsaradmin.Client, d utils.ClusterData) error {
		return c.Clusters().CreateWithContext(ctx, d)
	})
	update := withURLs("update CLUSTER", "Change a cluster's service URLs", func(ctx context.Context, c pulsaradmin.Client, d utils.ClusterData) error {
		return c.Clusters().UpdateWithContext(ctx, d)
	})
	del := a.verb("delete CLUSTER", "Delete a cluster (no tenant or namespace may still use it)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Clusters().DeleteWithContext(ctx, args[0])
	})
	return group("clusters", "Manage clusters (regions)", list, get, create, update, del)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---- brokers ----

func (a *adminCLI) brokersCommand() *cobra.Command {
	list := &cobra.Command{Use: "list [CLUSTER]", Short: "List the active brokers (of one cluster, or of this one)", Args: cobra.MaximumNArgs(1)}
	list.RunE = a.runE(func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		var bs []string
		var err error
		if len(args) == 1 {
			bs, err = c.Brokers().GetActiveBrokersWithContext(ctx, args[0])
		} else {
			bs, err = c.Brokers().GetListActiveBrokersWithContext(ctx)
		}
		if err != nil {
			return err
		}
		sort.Strings(bs)
		return p.list(bs)
	})
	var version string
	health := a.verb("healthcheck", "Check that the broker serves: prints ok, or fails", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		v := utils.TopicVersion(strings.ToUpper(version))
		if v != utils.TopicVersionV1 && v != utils.TopicVersionV2 {
			return fmt.Errorf("--topic-version %q: want V1 or V2", version)
		}
		if err := c.Brokers().HealthCheckWithTopicVersionWithContext(ctx, v); err != nil {
			return err
		}
		return p.scalar("ok", "ok")
	})
	health.Flags().StringVar(&version, "topic-version", string(utils.TopicVersionV1), "name form of the health check topic: V1 or V2")
	return group("brokers", "Inspect brokers", list, health, a.leaderBrokerVerb())
}

// ---- namespaces ----

func (a *adminCLI) namespacesCommand() *cobra.Command {
	list := a.verb("list TENANT", "List a tenant's namespaces", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := c.Namespaces().GetNamespacesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		sort.Strings(ns)
		return p.list(ns)
	})
	topics := a.verb("topics NAMESPACE", "List a namespace's topics", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ts, err := c.Namespaces().GetTopicsWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		sort.Strings(ts)
		return p.list(ts)
	})

	var (
		createClusters []string
		bundles        int
	)
	create := a.verb("create NAMESPACE", "Create a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if _, err := namespaceArg(args[0]); err != nil {
			return err
		}
		var err error
		if bundles > 0 {
			err = c.Namespaces().CreateNsWithNumBundlesWithContext(ctx, args[0], bundles)
		} else {
			err = c.Namespaces().CreateNamespaceWithContext(ctx, args[0])
		}
		if err != nil || len(createClusters) == 0 {
			return err
		}
		if err := c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, args[0], createClusters); err != nil {
			return fmt.Errorf("namespace %s created, but setting its clusters failed: %w", args[0], err)
		}
		return nil
	})
	create.Flags().StringSliceVarP(&createClusters, "clusters", "c", nil, "comma-separated replication clusters (default: the broker's)")
	create.Flags().IntVarP(&bundles, "bundles", "b", 0, "number of bundles (default: the broker's)")

	del := a.verb("delete NAMESPACE", "Delete a namespace (it must have no topics)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Namespaces().DeleteNamespaceWithContext(ctx, args[0])
	})
	policies := a.verb("policies NAMESPACE", "Show all of a namespace's policies", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		pol, err := c.Namespaces().GetPoliciesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.object(pol)
	})

	retention := a.retentionCommands()
	return group("namespaces", "Manage namespaces and their policies", list, topics, create, del, policies,
		a.unloadNamespaceCommand(),
		retention[0], retention[1],
		a.setTTLCommand(), a.getTTLCommand(),
		a.setDedupCommand(), a.getDedupCommand(),
		a.grantCommand(), a.revokeCommand(), a.permissionsCommand(),
		a.setClustersCommand(), a.getClustersCommand(),
		a.setBacklogQuotaCommand(), a.getBacklogQuotaCommand(), a.removeBacklogQuotaCommand(),
		a.setAutoTopicCreationCommand(), a.getAutoTopicCreationCommand(), a.removeAutoTopicCreationCommand(),
		a.setNamespaceDispatchRateCommand(), a.getNamespaceDispatchRateCommand(), a.removeNamespaceDispatchRateCommand(),
		a.splitBundleVerb())
}

func (a *adminCLI) retentionCommands() [2]*cobra.Command {
	var size, tm string
	set := a.verb("set-retention NAMESPACE", "Set how long and how much acknowledged data is kept", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if size == "" || tm == "" {
			return errors.New("give both --size and --time (-1 means unlimited, 0 no retention)")
		}
		bytes, err := parseSize(size)
		if err != nil {
			return fmt.Errorf("--size: %w", err)
		}
		secs, err := parseSeconds(tm)
		if err != nil {
			return fmt.Errorf("--time: %w", err)
		}
		pol := utils.RetentionPolicies{RetentionSizeInMB: -1, RetentionTimeInMinutes: -1}
		if bytes >= 0 {
			pol.RetentionSizeInMB = bytes / (1 << 20)
		}
		if secs >= 0 {
			pol.RetentionTimeInMinutes = int(secs / 60)
		}
		return c.Namespaces().SetRetentionWithContext(ctx, args[0], pol)
	})
	set.Flags().StringVarP(&size, "size", "s", "", "size limit: bytes, or a number with k, M, G or T (e.g. 10G); -1 for unlimited")
	set.Flags().StringVarP(&tm, "time", "t", "", "time limit: seconds, or a number with s, m, h, d, w or y (e.g. 3d); -1 for unlimited")
	get := a.verb("get-retention NAMESPACE", "Show a namespace's retention", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		r, err := c.Namespaces().GetRetentionWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if r == nil {
			r = &utils.RetentionPolicies{}
		}
		return p.table(r, []string{"RETENTION TIME (MINUTES)", "RETENTION SIZE (MB)"},
			[][]string{{strconv.Itoa(r.RetentionTimeInMinutes), strconv.FormatInt(r.RetentionSizeInMB, 10)}})
	})
	return [2]*cobra.Command{set, get}
}

func (a *adminCLI) setTTLCommand() *cobra.Command {
	var ttl string
	cmd := a.verb("set-message-ttl NAMESPACE", "Set the time after which unacknowledged messages expire (0: never)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if ttl == "" {
			return errors.New("give --messageTTL (seconds, or e.g. 1h; 0 means never)")
		}
		secs, err := parseSeconds(ttl)
		if err != nil || secs < 0 {
			return fmt.Errorf("--messageTTL %q: want 0 or more seconds (e.g. 3600 or 1h)", ttl)
		}
		return c.Namespaces().SetNamespaceMessageTTLWithContext(ctx, args[0], int(secs))
	})
	cmd.Flags().StringVar(&ttl, "messageTTL", "", "time to live: seconds, or a number with s, m, h, d or w; 0 disables")
	cmd.Flags().StringVar(&ttl, "ttl", "", "same as --messageTTL")
	return cmd
}

func (a *adminCLI) getTTLCommand() *cobra.Command {
	return a.verb("get-message-ttl NAMESPACE", "Show a namespace's message TTL in seconds", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ttl, err := c.Namespaces().GetNamespaceMessageTTLWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.scalar(strconv.Itoa(ttl), ttl)
	})
}

func (a *adminCLI) setDedupCommand() *cobra.Command {
	var enable, disable bool
	cmd := a.verb("set-deduplication NAMESPACE", "Turn message deduplication on (--enable) or off (--disable)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if enable == disable {
			return errors.New("give exactly one of --enable and --disable")
		}
		return c.Namespaces().SetDeduplicationStatusWithContext(ctx, args[0], enable)
	})
	cmd.Flags().BoolVarP(&enable, "enable", "e", false, "enable deduplication")
	cmd.Flags().BoolVarP(&disable, "disable", "d", false, "disable deduplication")
	return cmd
}

func (a *adminCLI) getDedupCommand() *cobra.Command {
	return a.verb("get-deduplication NAMESPACE", "Show whether deduplication is on (unset: the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		// pulsaradmin has no getter of its own: the flag is part of the policies.
		pol, err := c.Namespaces().GetPoliciesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if pol == nil || pol.DeduplicationEnabled == nil {
			return p.scalar("unset (broker default)", nil)
		}
		return p.scalar(strconv.FormatBool(*pol.DeduplicationEnabled), *pol.DeduplicationEnabled)
	})
}

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

func (a *adminCLI) setClustersCommand() *cobra.Command {
	var clusters []string
	cmd := a.verb("set-clusters NAMESPACE", "Set the clusters a namespace's topics replicate to", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if len(clusters) == 0 {
			return errors.New("give --clusters (comma-separated)")
		}
		return c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, args[0], clusters)
	})
	cmd.Flags().StringSliceVarP(&clusters, "clusters", "c", nil, "comma-separated replication clusters (required)")
	return cmd
}

func (a *adminCLI) getClustersCommand() *cobra.Command {
	return a.verb("get-clusters NAMESPACE", "Show the clusters a namespace replicates to", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		cs, err := c.Namespaces().GetNamespaceReplicationClustersWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.list(cs)
	})
}

func (a *adminCLI) setBacklogQuotaCommand() *cobra.Command {
	var limit, limitTime, policy, typ string
	cmd := a.verb("set-backlog-quota NAMESPACE", "Limit a namespace's backlog per topic, and say what happens past it", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		qt, err := utils.ParseBacklogQuotaType(typ)
		if err != nil {
			return fmt.Errorf("--type: %w", err)
		}
		pol, err := utils.ParseRetentionPolicy(policy)
		if err != nil {
			return fmt.Errorf("--policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", policy)
		}
		q := utils.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: pol}
		switch qt {
		case utils.DestinationStorage:
			if limit == "" {
				return errors.New("a destination_storage quota needs --limit (e.g. 10G)")
			}
			if q.LimitSize, err = parseSize(limit); err != nil {
				return fmt.Errorf("--limit: %w", err)
			}
		case utils.MessageAge:
			if limitTime == "" {
				return errors.New("a message_age quota needs --limitTime (e.g. 1h)")
			}
			if q.LimitTime, err = parseSeconds(limitTime); err != nil {
				return fmt.Errorf("--limitTime: %w", err)
			}
		}
		return c.Namespaces().SetBacklogQuotaWithContext(ctx, args[0], q, qt)
	})
	f := cmd.Flags()
	f.StringVarP(&limit, "limit", "l", "", "size limit for destination_storage: bytes, or a number with k, M, G or T")
	f.StringVar(&limitTime, "limitTime", "", "age limit for message_age: seconds, or a number with s, m, h, d or w")
	f.StringVarP(&policy, "policy", "p", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
	f.StringVarP(&typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")
	return cmd
}

func (a *adminCLI) getBacklogQuotaCommand() *cobra.Command {
	cmd := a.verb("get-backlog-quota NAMESPACE", "Show a namespace's backlog quotas", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		m, err := c.Namespaces().GetBacklogQuotaMapWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if m == nil {
			m = map[utils.BacklogQuotaType]utils.BacklogQuota{}
		}
		types := make([]string, 0, len(m))
		for t := range m {
			types = append(types, string(t))
		}
		sort.Strings(types)
		rows := make([][]string, 0, len(types))
		for _, t := range types {
			q := m[utils.BacklogQuotaType(t)]
			rows = append(rows, []string{t, strconv.FormatInt(q.LimitSize, 10), strconv.FormatInt(q.LimitTime, 10), string(q.Policy)})
		}
		return p.table(m, []string{"TYPE", "LIMIT SIZE (BYTES)", "LIMIT TIME (SECONDS)", "POLICY"}, rows)
	})
	cmd.Aliases = []string{"get-backlog-quotas"}
	return cmd
}

func (a *adminCLI) removeBacklogQuotaCommand() *cobra.Command {
	return a.verb("remove-backlog-quota NAMESPACE", "Remove a namespace's backlog quota", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Namespaces().RemoveBacklogQuotaWithContext(ctx, args[0])
	})
}

func (a *adminCLI) setAutoTopicCreationCommand() *cobra.Command {
	var (
		enable     bool
		typ        string
		partitions int
	)
	cmd := a.verb("set-auto-topic-creation NAMESPACE", "Allow (--enable) or forbid (no --enable) creating topics on first use", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		tt, err := utils.ParseTopicType(typ)
		if err != nil {
			return fmt.Errorf("--type: %w", err)
		}
		cfg := utils.TopicAutoCreationConfig{Allow: enable, Type: tt}
		if tt == utils.Partitioned {
			if partitions <= 0 {
				return errors.New("--type partitioned needs --num-partitions of 1 or more")
			}
			cfg.Partitions = &partitions
		}
		return c.Namespaces().SetTopicAutoCreationWithContext(ctx, ns, cfg)
	})
	f := cmd.Flags()
	f.BoolVarP(&enable, "enable", "e", false, "allow auto-creation (without it, auto-creation is forbidden)")
	f.StringVarP(&typ, "type", "t", string(utils.NonPartitioned), "partitioned or non-partitioned")
	f.IntVarP(&partitions, "num-partitions", "n", 0, "partitions of an auto-created partitioned topic")
	return cmd
}

func (a *adminCLI) getAutoTopicCreationCommand() *cobra.Command {
	return a.verb("get-auto-topic-creation NAMESPACE", "Show a namespace's auto topic creation override", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		cfg, err := c.Namespaces().GetTopicAutoCreationWithContext(ctx, ns)
		if err != nil {
			return err
		}
		if cfg == nil {
			return p.scalar("unset (broker default)", nil)
		}
		parts := "-"
		if cfg.Partitions != nil {
			parts = strconv.Itoa(*cfg.Partitions)
		}
		return p.table(cfg, []string{"ALLOW", "TYPE", "PARTITIONS"},
			[][]string{{strconv.FormatBool(cfg.Allow), orDash(string(cfg.Type)), parts}})
	})
}

func (a *adminCLI) removeAutoTopicCreationCommand() *cobra.Command {
	return a.verb("remove-auto-topic-creation NAMESPACE", "Remove the namespace's override (the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		return c.Namespaces().RemoveTopicAutoCreationWithContext(ctx, ns)
	})
}

// ---- topics ----

// topicVerb is a verb on one topic: the argument is parsed as pulsar-admin
// parses it (a short name is in public/default) before any request.
func (a *adminCLI) topicVerb(use, short string, fn func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error) *cobra.Command {
	return a.verb(use, short, 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		t, err := topicArg(args[0])
		if err != nil {
			return err
		}
		return fn(ctx, c, p, t)
	})
}

func (a *adminCLI) topicsCommand() *cobra.Command {
	list := a.verb("list NAMESPACE", "List a namespace's topics: partitioned topics and the others", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		part, nonPart, err := c.Topics().ListWithContext(ctx, ns)
		if err != nil {
			return err
		}
		sort.Strings(part)
		sort.Strings(nonPart)
		if p.json {
			return p.jsonValue(map[string][]string{"partitioned": nonNil(part), "nonPartitioned": nonNil(nonPart)})
		}
		return p.list(append(part, nonPart...))
	})
	create := a.topicVerb("create TOPIC", "Create a non-partitioned topic", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().CreateWithContext(ctx, t, 0)
	})
	partitionsVerb := func(use, short string, fn func(context.Context, pulsaradmin.Client, utils.TopicName, int) error) *cobra.Command {
		var n int
		cmd := a.topicVerb(use, short, func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			if n <= 0 {
				return errors.New("give --partitions (-p) of 1 or more")
			}
			return fn(ctx, c, t, n)
		})
		cmd.Flags().IntVarP(&n, "partitions", "p", 0, "number of partitions (required)")
		return cmd
	}
	createPart := partitionsVerb("create-partitioned-topic TOPIC", "Create a partitioned topic", func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName, n int) error {
		return c.Topics().CreateWithContext(ctx, t, n)
	})
	updatePart := partitionsVerb("update-partitioned-topic TOPIC", "Add partitions to a partitioned topic", func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName, n int) error {
		return c.Topics().UpdateWithContext(ctx, t, n)
	})

	var force bool
	del := a.topicVerb("delete TOPIC", "Delete a topic, partitioned or not (-f: even with producers or consumers)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		// One verb for both kinds: the partitioned metadata says which
		// endpoint to call (0 partitions: a plain topic, or none at all).
		md, err := c.Topics().GetMetadataWithContext(ctx, t)
		if err != nil {
			return err
		}
		return c.Topics().DeleteWithContext(ctx, t, force, md.Partitions == 0)
	})
	del.Flags().BoolVarP(&force, "force", "f", false, "delete even with connected producers or consumers")
	var forcePart bool
	delPart := a.topicVerb("delete-partitioned-topic TOPIC", "Delete a partitioned topic and its partitions", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().DeleteWithContext(ctx, t, forcePart, false)
	})
	delPart.Flags().BoolVarP(&forcePart, "force", "f", false, "delete even with connected producers or consumers")

	stats := a.topicVerb("stats TOPIC", "Show a topic's statistics (the server's JSON, as it sent it)", func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
		body, err := a.rawGet(ctx, topicPath(t, "stats"), nil)
		if err != nil {
			return err
		}
		return p.raw(body)
	})
	var perPartition bool
	pstats := a.topicVerb("partitioned-stats TOPIC", "Show a partitioned topic's statistics, summed over its partitions", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		body, err := a.rawGet(ctx, topicPath(t, "partitioned-stats"), map[string]string{"perPartition": strconv.FormatBool(perPartition)})
		if err != nil {
			return err
		}
		return p.raw(body)
	})
	pstats.Flags().BoolVar(&perPartition, "per-partition", false, "also show each partition's statistics")
	internal := a.topicVerb("stats-internal TOPIC", "Show a topic's internal statistics (ledgers and cursors)", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		s, err := c.Topics().GetInternalStatsWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.object(s)
	})
	subs := a.topicVerb("subscriptions TOPIC", "List a topic's subscriptions", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		ss, err := c.Subscriptions().ListWithContext(ctx, t)
		if err != nil {
			return err
		}
		sort.Strings(ss)
		return p.list(ss)
	})
	terminate := a.topicVerb("terminate TOPIC", "Seal a topic: no more messages may be published", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		id, err := c.Topics().TerminateWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar("Topic successfully terminated at "+shortID(id), id)
	})
	unload := a.topicVerb("unload TOPIC", "Unload a topic from its broker (it loads again on next use)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().UnloadWithContext(ctx, t)
	})
	lookup := a.topicVerb("lookup TOPIC", "Show the broker that serves a topic", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		l, err := c.Topics().LookupWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar(l.BrokerURL, l)
	})
	last := a.topicVerb("last-message-id TOPIC", "Show the id of a topic's last message", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		id, err := c.Topics().GetLastMessageIDWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar(shortID(id), id)
	})

	return group("topics", "Manage topics and their subscriptions", list, create, createPart, updatePart, del, delPart,
		stats, pstats, internal, subs, a.createSubCommand(), a.unsubscribeCommand(), a.skipCommand(),
		a.clearBacklogCommand(), a.resetCursorCommand(), a.expireCommand(), a.peekCommand(),
		terminate, unload, lookup, last, a.bundleRangeCommand(),
		a.setTopicDispatchRateCommand(), a.getTopicDispatchRateCommand(), a.removeTopicDispatchRateCommand(),
		a.setTopicClustersCommand(), a.getTopicClustersCommand(), a.removeTopicClustersCommand())
}

// shortID prints a message id as pulsar-admin does: ledger:entry, with the
// partition only for a partition's message.
func shortID(id utils.MessageID) string {
	s := strconv.FormatInt(id.LedgerID, 10) + ":" + strconv.FormatInt(id.EntryID, 10)
	if id.PartitionIndex >= 0 {
		s += ":" + strconv.Itoa(id.PartitionIndex)
	}
	return s
}

// messageIDArg parses "latest", "earliest" or ledger:entry[:partition[:batch]].
func messageIDArg(s string) (utils.MessageID, error) {
	switch strings.ToLower(s) {
	case "latest":
		return utils.Latest, nil
	case "earliest":
		return utils.Earliest, nil
	}
	id, err := utils.ParseMessageID(s)
	if err != nil {
		return utils.MessageID{}, fmt.Errorf("message id %q: want latest, earliest or ledger:entry", s)
	}
	return *id, nil
}

// subVerb is a verb on one subscription of one topic (--subscription/-s).
func (a *adminCLI) subVerb(use, short string, fn func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName, sub string) error) (*cobra.Command, *string) {
	sub := new(string)
	cmd := a.topicVerb(use, short, func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		if *sub == "" {
			return errors.New("give --subscription (-s)")
		}
		return fn(ctx, c, p, t, *sub)
	})
	cmd.Flags().StringVarP(sub, "subscription", "s", "", "subscription name (required)")
	return cmd, sub
}

func (a *adminCLI) createSubCommand() *cobra.Command {
	var at string
	cmd, _ := a.subVerb("create-subscription TOPIC", "Create a subscription at a position", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		id, err := messageIDArg(at)
		if err != nil {
			return fmt.Errorf("--messageId: %w", err)
		}
		return c.Subscriptions().CreateWithContext(ctx, t, sub, id)
	})
	cmd.Flags().StringVarP(&at, "messageId", "m", "latest", "where it starts: latest, earliest or ledger:entry")
	return cmd
}

func (a *adminCLI) unsubscribeCommand() *cobra.Command {
	var force bool
	cmd, _ := a.subVerb("unsubscribe TOPIC", "Delete a subscription (-f: even with consumers connected)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		if force {
			return c.Subscriptions().ForceDeleteWithContext(ctx, t, sub)
		}
		return c.Subscriptions().DeleteWithContext(ctx, t, sub)
	})
	cmd.Flags().BoolVarP(&force, "force", "f", false, "disconnect its consumers and delete it")
	return cmd
}

func (a *adminCLI) skipCommand() *cobra.Command {
	var n int64
	cmd, _ := a.subVerb("skip TOPIC", "Skip (acknowledge) the next N messages of a subscription", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		if n <= 0 {
			return errors.New("give --count (-n) of 1 or more")
		}
		return c.Subscriptions().SkipMessagesWithContext(ctx, t, sub, n)
	})
	cmd.Flags().Int64VarP(&n, "count", "n", 0, "number of messages to skip (required)")
	return cmd
}

func (a *adminCLI) clearBacklogCommand() *cobra.Command {
	cmd, _ := a.subVerb("clear-backlog TOPIC", "Skip every message of a subscription's backlog", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		return c.Subscriptions().ClearBacklogWithContext(ctx, t, sub)
	})
	return cmd
}

func (a *adminCLI) resetCursorCommand() *cobra.Command {
	var ago, at string
	cmd, _ := a.subVerb("reset-cursor TOPIC", "Move a subscription back or forward, to a time (-t) or a message (-m)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName, sub string) error {
		switch {
		case (ago == "") == (at == ""):
			return errors.New("give exactly one of --time (-t, e.g. 1h ago) and --messageId (-m)")
		case at != "":
			id, err := messageIDArg(at)
			if err != nil {
				return fmt.Errorf("--messageId: %w", err)
			}
			return c.Subscriptions().ResetCursorToMessageIDWithContext(ctx, t, sub, id)
		}
		secs, err := parseSeconds(ago)
		if err != nil || secs < 0 {
			return fmt.Errorf("--time %q: want how long ago, e.g. 100m, 3h, 2d", ago)
		}
		ts := time.Now().Add(-time.Duration(secs) * time.Second).UnixMilli()
		return c.Subscriptions().ResetCursorToTimestampWithContext(ctx, t, sub, ts)
	})
	cmd.Flags().StringVarP(&ago, "time", "t", "", "how far back from now: seconds, or a number with s, m, h, d or w")
	cmd.Flags().StringVarP(&at, "messageId", "m", "", "the message to reset to: ledger:entry, earliest or latest")
	return cmd
}

func (a *adminCLI) expireCommand() *cobra.Command {
	var (
		expire string
		all    bool
		sub    string
	)
	cmd := a.topicVerb("expire-messages TOPIC", "Acknowledge a subscription's messages older than --expireTime", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		secs, err := parseSeconds(expire)
		if expire == "" || err != nil || secs < 0 {
			return fmt.Errorf("--expireTime %q: want an age, e.g. 60 or 1h", expire)
		}
		switch {
		case all && sub != "":
			return errors.New("give --subscription or --all-subscriptions, not both")
		case all:
			return c.Subscriptions().ExpireAllMessagesWithContext(ctx, t, secs)
		case sub == "":
			return errors.New("give --subscription (-s) or --all-subscriptions")
		}
		return c.Subscriptions().ExpireMessagesWithContext(ctx, t, sub, secs)
	})
	f := cmd.Flags()
	f.StringVarP(&sub, "subscription", "s", "", "subscription name")
	f.BoolVar(&all, "all-subscriptions", false, "expire on every subscription of the topic")
	f.StringVarP(&expire, "expireTime", "t", "", "messages older than this expire: seconds, or a number with s, m, h, d or w (required)")
	return cmd
}

// peekedMessage is a peeked message as --output json prints it.
type peekedMessage struct {
	MessageID  string            `json:"messageId"`
	Topic      string            `json:"topic,omitempty"`
	Properties map[string]string `json:"properties"`
	Payload    []byte            `json:"payload"`
}

func (a *adminCLI) peekCommand() *cobra.Command {
	var n int
	cmd, _ := a.subVerb("peek-messages TOPIC", "Show the next N messages of a subscription without acknowledging them", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName, sub string) error {
		if n <= 0 {
			return errors.New("give --count (-n) of 1 or more")
		}
		msgs, err := c.Subscriptions().PeekMessagesWithContext(ctx, t, sub, n)
		if err != nil {
			return err
		}
		if p.json {
			out := make([]peekedMessage, 0, len(msgs))
			for _, m := range msgs {
				out = append(out, peekedMessage{MessageID: m.MessageID.String(), Topic: m.Topic, Properties: m.Properties, Payload: m.Payload})
			}
			return p.jsonValue(out)
		}
		for i, m := range msgs {
			keys := make([]string, 0, len(m.Properties))
			for k := range m.Properties {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			props := make([]string, 0, len(keys))
			for _, k := range keys {
				props = append(props, k+"="+m.Properties[k])
			}
			if _, err := fmt.Fprintf(p.w, "Batch Message ID: %s\nProperties: %s\n%s", m.MessageID.String(),
				strings.Join(props, ", "), hex.Dump(m.Payload)); err != nil {
				return err
			}
			if i < len(msgs)-1 {
				fmt.Fprintln(p.w)
			}
		}
		return nil
	})
	cmd.Flags().IntVarP(&n, "count", "n", 1, "number of messages")
	return cmd
}

// ---- argument parsing ----

// parseSize parses a size as pulsar-admin does: bytes, or a number with
// k, m, g or t (powers of 1024); -1 means unlimited.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "-1" {
		return -1, nil
	}
	mult := int64(1)
	if s != "" {
		switch strings.ToLower(s[len(s)-1:]) {
		case "k":
			mult = 1 << 10
		case "m":
			mult = 1 << 20
		case "g":
			mult = 1 << 30
		case "t":
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, errors.New("want bytes, or a number with k, M, G or T (e.g. 10G), or -1 for unlimited")
	}
	return n * mult, nil
}

// parseSeconds parses a time as pulsar-admin's RelativeTimeUtil does
// (seconds, or a number with s, m, h, d, w or y), and also 0 and -1
// (unlimited), which some policies take.
func parseSeconds(s string) (int64, error) {
	switch strings.TrimSpace(s) {
	case "-1":
		return -1, nil
	case "0":
		return 0, nil
	}
	d, err := parseRelativeTime(s)
	if err != nil {
		return 0, err
	}
	return int64(d / time.Second), nil
}
