package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	padmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/auth"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// `meridian admin` lives in files named admin_<what>.go. A group's file
// builds the group and holds the verbs that are its alone. A kind of verb
// that more than one group has, or that Pulsar documents apart, has a file
// of its own, which the groups' files draw on:
//
//	admin.go               the root command, its flags, the client, explain and the verb builders
//	admin_output.go        how results print: text as pulsar-admin prints it, or --output json
//	admin_args.go          parsing names, message ids, sizes and times
//	admin_tenants.go       tenants
//	admin_clusters.go      clusters
//	admin_brokers.go       brokers, and their dynamic configuration
//	admin_namespaces.go    namespaces
//	admin_topics.go        topics, and their properties
//	admin_subscriptions.go the verbs on a topic's subscriptions (create-subscription, skip, peek-messages...)
//	admin_policies.go      namespace policies: retention, message TTL, deduplication, backlog quota, auto topic
//	                       and subscription creation, the limits on producers, consumers and topics, properties
//	admin_topicpolicies.go topic policies, over the namespace's: set-, get- (--applied) and remove-<policy>
//	admin_permissions.go   permissions of namespaces and topics, and subscription permissions
//	admin_schemas.go       schemas (get, upload, delete, test-compatibility) and the schema compatibility strategy
//	admin_messages.go      reading messages: get-message-by-id, get-message-id, and how messages print
//	admin_replication.go   replication clusters and replicator dispatch rates, of namespaces and topics
//	admin_bundles.go       bundles: namespaces bundles and unload, topics bundle-range
//	admin_load.go          load balancing and statistics: broker-stats, brokers leader-broker, namespaces split-bundle

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
	// stderr receives the server's warnings (see warningPrinter).
	stderr io.Writer
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
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if a.output != "table" && a.output != "text" && a.output != "json" {
				return fmt.Errorf("--output %q: want table or json", a.output)
			}
			a.stderr = cmd.ErrOrStderr()
			return nil
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&a.url, "admin-url", "http://localhost:8080", "the admin REST API's URL (a broker's web service URL; https:// for TLS)")
	pf.StringVar(&a.authPlugin, "auth-plugin", "", "authentication plugin: token or tls (or their org.apache.pulsar.client.impl.auth class names)")
	pf.StringVar(&a.authParams, "auth-params", "", `the plugin's parameters: for token "token:<jwt>", "file:<path>" or {"token":...}; for tls "tlsCertFile:<path>,tlsKeyFile:<path>"`)
	a.register(cmd)
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table (text, as pulsar-admin prints) or json")
	cmd.AddCommand(a.tenantsCommand(), a.namespacesCommand(), a.topicsCommand(), a.schemasCommand(),
		a.clustersCommand(), a.brokersCommand(), a.brokerStatsCommand(), a.bookiesCommand())
	return cmd
}

// client makes the pulsaradmin client the flags describe. Conflicting
// credentials are an error rather than a silent choice: pulsaradmin would
// otherwise pick one of them by its own precedence.
func (a *adminCLI) client() (pulsaradmin.Client, error) {
	cfg, transport, err := a.connection()
	if err != nil {
		return nil, err
	}
	c, err := padmin.NewPulsarClientWithAuthProvider(cfg, transport)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return c, nil
}

// connection is the configuration the flags describe and the transport of
// every request: the credentials, as pulsaradmin sends them, and the
// printing of the server's warnings.
func (a *adminCLI) connection() (*pulsaradmin.Config, auth.Provider, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, nil, err
	}
	provider, err := auth.GetAuthProvider(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	return cfg, warningPrinter{Provider: provider, w: a.stderr}, nil
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
	cfg, transport, err := a.connection()
	if err != nil {
		return nil, err
	}
	return &rest.Client{ServiceURL: cfg.WebServiceURL, VersionInfo: padmin.ReleaseVersion,
		HTTPClient: &http.Client{Timeout: padmin.DefaultHTTPTimeOutDuration, Transport: transport}}, nil
}

// warningPrinter prints to w the text of every HTTP Warning header of the
// answers to the requests it carries. The admin API warns that way about a
// policy it stores but does not act on (RFC 7234's form:
// 299 - "offload is not built: ..."), so the operator hears of it at once.
type warningPrinter struct {
	auth.Provider // sends the request, with the credentials
	w             io.Writer
}

func (p warningPrinter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.Provider.RoundTrip(req)
	if resp != nil && p.w != nil {
		for _, v := range resp.Header.Values("Warning") {
			fmt.Fprintf(p.w, "meridian: warning: %s\n", warningText(v))
		}
	}
	return resp, err
}

// warningText is the quoted text of a Warning header value (code, agent,
// "text", optional "date"), unescaped; a value not in that form is
// returned whole.
func warningText(v string) string {
	_, rest, ok := strings.Cut(v, `"`)
	if !ok {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case c == '"':
			return b.String()
		case c == '\\' && i+1 < len(rest):
			i++
			b.WriteByte(rest[i])
		default:
			b.WriteByte(c)
		}
	}
	return v // no closing quote
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

// rawVerb is a verb without arguments that GETs path and prints the
// server's JSON as it is.
func (a *adminCLI) rawVerb(use, short, path string) *cobra.Command {
	return a.verb(use, short, 0, func(ctx context.Context, _ pulsaradmin.Client, p *printer, _ []string) error {
		body, err := a.rawGet(ctx, path, nil)
		if err != nil {
			return err
		}
		return p.raw(body)
	})
}

func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	cmd.AddCommand(subs...)
	return cmd
}

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
