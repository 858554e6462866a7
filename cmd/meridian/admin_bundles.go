package main

import (
	"context"
	"errors"
	"net/url"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// unloadNamespaceCommand is pulsar-admin's `namespaces unload`: the whole
// namespace, or one bundle (--bundle), handed to a chosen broker
// (--destinationBroker, our broker id or Pulsar's host:webPort) or to the
// one the region's placement picks.
func (a *adminCLI) unloadNamespaceCommand() *cobra.Command {
	var bundle, destination string
	cmd := a.verb("unload NAMESPACE", "Unload a namespace, or one of its bundles, from the brokers that serve it", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			switch {
			case bundle == "" && destination != "":
				return errors.New("--destinationBroker needs --bundle: a whole namespace goes where placement puts it")
			case bundle == "":
				return c.Namespaces().UnloadWithContext(ctx, ns.String())
			case destination == "":
				return c.Namespaces().UnloadNamespaceBundleWithContext(ctx, ns.String(), bundle)
			}
			// pulsaradmin has no call that passes destinationBroker.
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			path := "/admin/v2/namespaces/" + ns.String() + "/" + url.PathEscape(bundle) + "/unload"
			return rc.PutWithQueryParamsWithContext(ctx, path, nil, nil, map[string]string{"destinationBroker": destination})
		})
	cmd.Flags().StringVarP(&bundle, "bundle", "b", "", "the bundle to unload, e.g. 0x00000000_0x40000000 (default: every bundle)")
	cmd.Flags().StringVarP(&destination, "destinationBroker", "d", "", "the broker to hand the bundle to: its id, or host:webPort (default: the least loaded)")
	return cmd
}

// bundleRangeCommand is pulsar-admin's `topics bundle-range`: the bundle a
// topic falls in.
func (a *adminCLI) bundleRangeCommand() *cobra.Command {
	return a.topicVerb("bundle-range TOPIC", "Show the bundle a topic falls in", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		rng, err := c.Topics().GetBundleRangeWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar(rng, rng)
	})
}

// bundlesCommand is pulsar-admin's `namespaces bundles`: a namespace's
// bundles, as the boundaries of their hash ranges.
func (a *adminCLI) bundlesCommand() *cobra.Command {
	return a.verb("bundles NAMESPACE", "Show a namespace's bundles: the boundaries of their hash ranges", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			path, err := namespaceEndpointPath(args[0], "bundles")
			if err != nil {
				return err
			}
			// pulsaradmin has no call for it.
			body, err := a.rawGet(ctx, path, nil)
			if err != nil {
				return err
			}
			return p.raw(body)
		})
}
