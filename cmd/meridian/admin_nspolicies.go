package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/spf13/cobra"
)

// The namespace policies of `meridian admin namespaces` that are a body
// set at one REST path: the publish, dispatch and subscribe rates, delayed
// delivery, persistence, offload and compaction. Each has pulsar-admin's
// three verbs, set-<name>, get-<name> and remove-<name>, and the set
// verb's flags by pulsar-admin's long names (its multi-letter short
// names, such as -md, are spelt out in each flag's help). A get prints the
// policy as the server answers it (null when unset).

// nsPolicy is one such policy.
type nsPolicy struct {
	name       string // the verbs' suffix
	path       string // below /admin/v2/namespaces/{tenant}/{namespace}/
	deletePath string // where remove- sends DELETE, when not path
	what       string // for the verbs' help
	// flags registers the set verb's flags and returns what builds its
	// body from them.
	flags func(cmd *cobra.Command) (body func() (any, error))
}

var namespacePolicies = []nsPolicy{
	{name: "publish-rate", path: "publishRate", what: "the rate at which each topic takes messages (in this region)", flags: publishRateFlags},
	{name: "dispatch-rate", path: "dispatchRate", what: "the rate at which each topic dispatches messages (in this region)", flags: rateFlags},
	{name: "subscription-dispatch-rate", path: "subscriptionDispatchRate", what: "the rate at which each subscription dispatches messages (in this region)", flags: rateFlags},
	{name: "subscribe-rate", path: "subscribeRate", what: "the rate at which each consumer may subscribe (in this region)", flags: subscribeRateFlags},
	{name: "delayed-delivery", path: "delayedDelivery", what: "whether delayed delivery is on, and its tick", flags: delayedDeliveryFlags},
	{name: "persistence", path: "persistence", what: "the ensemble, write and ack quorums of new ledgers", flags: persistenceFlags},
	{name: "offload-policies", path: "offloadPolicies", deletePath: "removeOffloadPolicies", what: "the tiered-storage offload policies", flags: offloadFlags},
	{name: "compaction-threshold", path: "compactionThreshold", what: "the backlog size that triggers compaction", flags: compactionFlags},
}

// namespacePolicyCommands are the verbs of namespacePolicies.
func (a *adminCLI) namespacePolicyCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, np := range namespacePolicies {
		path := func(ns string) (string, error) {
			if _, err := namespaceArg(ns); err != nil {
				return "", err
			}
			return "/admin/v2/namespaces/" + ns + "/" + np.path, nil
		}
		var body func() (any, error)
		set := a.verb("set-"+np.name+" NAMESPACE", "Set "+np.what, 1, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			p, err := path(args[0])
			if err != nil {
				return err
			}
			b, err := body()
			if err != nil {
				return err
			}
			c, err := a.restClient()
			if err != nil {
				return err
			}
			return c.PostWithContext(ctx, p, b)
		})
		body = np.flags(set)
		get := a.verb("get-"+np.name+" NAMESPACE", "Show "+np.what+" (null: unset)", 1, func(ctx context.Context, _ pulsaradmin.Client, pr *printer, args []string) error {
			p, err := path(args[0])
			if err != nil {
				return err
			}
			b, err := a.rawGet(ctx, p, nil)
			if err != nil {
				return err
			}
			if len(b) == 0 { // 204: unset
				return pr.jsonValue(nil)
			}
			return pr.raw(b)
		})
		remove := a.verb("remove-"+np.name+" NAMESPACE", "Remove "+np.what, 1, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			p, err := path(args[0])
			if err != nil {
				return err
			}
			if np.deletePath != "" {
				p = "/admin/v2/namespaces/" + args[0] + "/" + np.deletePath
			}
			return a.restDelete(ctx, p)
		})
		cmds = append(cmds, set, get, remove)
	}
	return cmds
}

func publishRateFlags(cmd *cobra.Command) func() (any, error) {
	var msgs, bytes int64
	fs := cmd.Flags()
	fs.Int64VarP(&msgs, "msg-publish-rate", "m", -1, "messages per second (-1: no limit)")
	fs.Int64VarP(&bytes, "byte-publish-rate", "b", -1, "bytes per second (-1: no limit)")
	return func() (any, error) {
		return map[string]int64{"publishThrottlingRateInMsg": msgs, "publishThrottlingRateInByte": bytes}, nil
	}
}

// rateFlags are pulsar-admin's flags of set-dispatch-rate and
// set-subscription-dispatch-rate.
func rateFlags(cmd *cobra.Command) func() (any, error) {
	var (
		msgs, bytes int64
		period      int
		relative    bool
	)
	fs := cmd.Flags()
	fs.Int64Var(&msgs, "msg-dispatch-rate", -1, "messages per period, -md (-1: no limit)")
	fs.Int64Var(&bytes, "byte-dispatch-rate", -1, "bytes per period, -bd (-1: no limit)")
	fs.IntVar(&period, "dispatch-rate-period", 1, "the period in seconds, -dt")
	fs.BoolVar(&relative, "relative-to-publish-rate", false, "the rates are above the publish rate, -rp")
	return func() (any, error) {
		if period < 1 {
			return nil, errors.New("--dispatch-rate-period must be 1 or more")
		}
		return map[string]any{"dispatchThrottlingRateInMsg": msgs, "dispatchThrottlingRateInByte": bytes,
			"ratePeriodInSecond": period, "relativeToPublishRate": relative}, nil
	}
}

func subscribeRateFlags(cmd *cobra.Command) func() (any, error) {
	var rate, period int
	fs := cmd.Flags()
	fs.IntVar(&rate, "subscribe-rate", -1, "subscribes per period per consumer, -sr (-1: no limit)")
	fs.IntVar(&period, "subscribe-rate-period", 30, "the period in seconds, -st")
	return func() (any, error) {
		if period < 1 {
			return nil, errors.New("--subscribe-rate-period must be 1 or more")
		}
		return map[string]int{"subscribeThrottlingRatePerConsumer": rate, "ratePeriodInSecond": period}, nil
	}
}

func delayedDeliveryFlags(cmd *cobra.Command) func() (any, error) {
	var (
		enable, disable bool
		tick, maxDelay  string
	)
	fs := cmd.Flags()
	fs.BoolVarP(&enable, "enable", "e", false, "enable delayed delivery")
	fs.BoolVarP(&disable, "disable", "d", false, "disable delayed delivery")
	fs.StringVarP(&tick, "time", "t", "1s", "the tick time (e.g. 1s or 1m)")
	fs.StringVar(&maxDelay, "maxDelay", "0", "the longest delay a message may ask for, -md (0: no limit)")
	return func() (any, error) {
		if enable == disable {
			return nil, errors.New("give exactly one of --enable and --disable")
		}
		tickTime, err := parseRelativeTime(tick)
		if err != nil || tickTime <= 0 {
			return nil, fmt.Errorf("--time %q: want a time such as 1s or 1m", tick)
		}
		maxSecs, err := parseSeconds(maxDelay)
		if err != nil || maxSecs < 0 {
			return nil, fmt.Errorf("--maxDelay %q: want 0 or a time such as 1h", maxDelay)
		}
		return map[string]any{"active": enable, "tickTime": tickTime.Milliseconds(), "maxDelayInMillis": maxSecs * 1000}, nil
	}
}

func persistenceFlags(cmd *cobra.Command) func() (any, error) {
	var (
		ensemble, writeQuorum, ackQuorum int
		markDeleteRate                   float64
	)
	fs := cmd.Flags()
	fs.IntVarP(&ensemble, "bookkeeper-ensemble", "e", 2, "bookies each new ledger is striped over (E)")
	fs.IntVarP(&writeQuorum, "bookkeeper-write-quorum", "w", 2, "copies of each entry (Qw)")
	fs.IntVarP(&ackQuorum, "bookkeeper-ack-quorum", "a", 2, "copies acknowledged before an add completes (Qa)")
	fs.Float64VarP(&markDeleteRate, "ml-mark-delete-max-rate", "r", 0, "most writes of each cursor's mark-delete per second (0: the region's --cursor-persist-interval)")
	return func() (any, error) {
		if !(ensemble >= writeQuorum && writeQuorum >= ackQuorum && ackQuorum >= 1) {
			return nil, fmt.Errorf("want E >= Qw >= Qa >= 1, have %d/%d/%d", ensemble, writeQuorum, ackQuorum)
		}
		return map[string]any{"bookkeeperEnsemble": ensemble, "bookkeeperWriteQuorum": writeQuorum,
			"bookkeeperAckQuorum": ackQuorum, "managedLedgerMaxMarkDeleteRate": markDeleteRate}, nil
	}
}

func offloadFlags(cmd *cobra.Command) func() (any, error) {
	var driver, region, bucket, endpoint string
	fs := cmd.Flags()
	fs.StringVarP(&driver, "driver", "d", "", "the offload driver (aws-s3, google-cloud-storage, filesystem, ...)")
	fs.StringVarP(&region, "region", "r", "", "the bucket's region")
	fs.StringVarP(&bucket, "bucket", "b", "", "the bucket")
	fs.StringVarP(&endpoint, "endpoint", "e", "", "an alternative endpoint")
	return func() (any, error) {
		if driver == "" {
			return nil, errors.New("give --driver")
		}
		return map[string]string{"managedLedgerOffloadDriver": driver, "s3ManagedLedgerOffloadRegion": region,
			"s3ManagedLedgerOffloadBucket": bucket, "s3ManagedLedgerOffloadServiceEndpoint": endpoint}, nil
	}
}

func compactionFlags(cmd *cobra.Command) func() (any, error) {
	threshold := compactionThresholdFlag(cmd)
	return func() (any, error) { return threshold() }
}

// compactionThresholdFlag is pulsar-admin's --threshold (-t) of
// set-compaction-threshold, on a namespace or a topic.
func compactionThresholdFlag(cmd *cobra.Command) func() (int64, error) {
	var threshold string
	cmd.Flags().StringVarP(&threshold, "threshold", "t", "", "the backlog size, in bytes or with k, M, G or T (0: never)")
	return func() (int64, error) {
		n, err := parseSize(threshold)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("--threshold %q: want 0 or more bytes (e.g. 100M)", threshold)
		}
		return n, nil
	}
}
