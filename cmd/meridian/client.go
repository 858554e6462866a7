package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/spf13/cobra"
)

// `meridian produce` and `meridian consume` are Apache Pulsar's
// `pulsar-client produce` and `pulsar-client consume`: the same flags and
// the same output, so that a command line or a script that reads the
// output carries over. They connect through the perfCLI of `meridian perf`
// (service URL, authentication, TLS), whose flags they take.

// connectionFlags adds the service URL, the operation timeout and
// `meridian perf`'s authentication and TLS flags to cmd, and returns the
// perfCLI that holds them. The URL is --url, as pulsar-client names it, or
// -u/--service-url, as `meridian perf` names it: two flags on one field.
func connectionFlags(cmd *cobra.Command) *perfCLI {
	p := &perfCLI{maxConns: 1}
	f := cmd.Flags()
	const defaultURL = "pulsar://localhost:6650"
	f.StringVar(&p.serviceURL, "url", defaultURL, "the broker's service URL, pulsar:// or pulsar+ssl:// for TLS")
	f.StringVarP(&p.serviceURL, "service-url", "u", defaultURL, "another name of --url, as meridian perf has it")
	f.DurationVar(&p.opTimeout, "operation-timeout", 30*time.Second,
		"how long connecting and creating the producer or consumer may take (the client's operation timeout)")
	p.listenerFlag(f)
	p.register(cmd)
	return p
}

// connect checks connectionFlags' flags of cmd and makes the client they
// describe, with the command's context, which SIGINT or SIGTERM ends;
// release closes both.
func connect(cmd *cobra.Command, p *perfCLI) (ctx context.Context, client pulsar.Client, release func(), err error) {
	if cmd.Flags().Changed("url") && cmd.Flags().Changed("service-url") {
		return nil, nil, nil, errors.New("--url and -u/--service-url are one flag: give one of them")
	}
	if err := p.validateConnection("--url"); err != nil {
		return nil, nil, nil, err
	}
	ctx, stopSignals := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	client, err = p.client(cmd.ErrOrStderr())
	if err != nil {
		stopSignals()
		return nil, nil, nil, err
	}
	return ctx, client, func() { client.Close(); stopSignals() }, nil
}

// oneTopic returns the one topic of args, or an error that says what to
// give.
func oneTopic(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", errors.New("no topic: give one topic, e.g. persistent://public/default/my-topic")
	case len(args) > 1:
		return "", fmt.Errorf("%d topics (%s): give exactly one", len(args), strings.Join(args, " "))
	case args[0] == "":
		return "", errors.New("empty topic name: give a topic, e.g. persistent://public/default/my-topic")
	}
	return args[0], nil
}

// ---- produce ----

// produceFlags are `meridian produce`'s own flags, with pulsar-client's
// names.
type produceFlags struct {
	conn                *perfCLI
	messages            []string
	times               int
	key                 string
	properties          []string
	disableReplication  bool
	replicationClusters []string
}

func newProduceCommand() *cobra.Command {
	a := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Send messages to a topic, like pulsar-client produce",
		Long: `Send each --messages text as one message, --num-produce times over, and
print each message's id as it is stored, then "N messages successfully
produced". The flags are pulsar-client's: give -m once per message (a
message may hold commas); -p takes key=value pairs, repeated or
comma-separated.
  meridian produce persistent://public/default/t -m hello -m world -n 2 -k key1 -p a=1,b=2
-dr (pulsar-client's short name of --disable-replication) keeps the
messages in this region; --replication-clusters sends them to those
regions only.`,
		RunE: func(cmd *cobra.Command, args []string) error { return a.run(cmd, args) },
	}
	a.conn = connectionFlags(cmd)
	f := cmd.Flags()
	f.StringArrayVarP(&a.messages, "messages", "m", nil, "a message to send (repeat -m for more messages)")
	f.IntVarP(&a.times, "num-produce", "n", 1, "how many times to send the messages")
	f.StringVarP(&a.key, "key", "k", "", "the key of every message (it chooses the partition)")
	f.StringSliceVarP(&a.properties, "properties", "p", nil, "key=value properties of every message (repeat -p, or separate them with commas)")
	f.BoolVar(&a.disableReplication, "disable-replication", false, "keep the messages in this region (short form -dr)")
	withShorthand(f, "disable-replication", "dr")
	f.StringSliceVar(&a.replicationClusters, "replication-clusters", nil, "replicate the messages to these regions only, e.g. us-east,eu-west")
	return cmd
}

// parseProperties reads key=value pairs, as -p gives them.
func parseProperties(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	props := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--properties %q: want key=value, e.g. -p region=us-east,tier=gold", pair)
		}
		props[k] = v
	}
	return props, nil
}

// validate checks the flags and returns the properties they give.
func (a *produceFlags) validate() (map[string]string, error) {
	switch {
	case len(a.messages) == 0:
		return nil, errors.New("no message: give one or more -m/--messages, e.g. -m hello")
	case a.times < 1:
		return nil, fmt.Errorf("--num-produce %d: want 1 or more", a.times)
	case a.disableReplication && len(a.replicationClusters) > 0:
		return nil, errors.New("-dr/--disable-replication and --replication-clusters contradict each other: give one")
	case slices.Contains(a.replicationClusters, ""):
		return nil, fmt.Errorf("--replication-clusters %q: an empty region name", strings.Join(a.replicationClusters, ","))
	}
	return parseProperties(a.properties)
}

func (a *produceFlags) run(cmd *cobra.Command, args []string) error {
	topic, err := oneTopic(args)
	if err != nil {
		return err
	}
	props, err := a.validate()
	if err != nil {
		return err
	}
	ctx, client, release, err := connect(cmd, a.conn)
	if err != nil {
		return err
	}
	defer release()
	// Each Send waits for its receipt, so a batch would only ever hold one
	// message and add the batching delay to every send.
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		return a.conn.unreachable("producer", topic, err)
	}
	defer producer.Close()
	out := cmd.OutOrStdout()
	total := a.times * len(a.messages)
	sent := 0
	for range a.times {
		for _, m := range a.messages {
			id, err := producer.Send(ctx, &pulsar.ProducerMessage{
				Payload:             []byte(m),
				Key:                 a.key,
				Properties:          props,
				DisableReplication:  a.disableReplication,
				ReplicationClusters: a.replicationClusters,
			})
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted after %d of %d messages were produced", sent, total)
				}
				return fmt.Errorf("send to %s failed after %d of %d messages were produced: %w", topic, sent, total, err)
			}
			sent++
			fmt.Fprintf(out, "produced message %d of %d: id %s\n", sent, total, id)
		}
	}
	fmt.Fprintf(out, "%d messages successfully produced\n", sent)
	return nil
}

// ---- consume ----

// consumeFlags are `meridian consume`'s own flags, with pulsar-client's
// names and defaults.
type consumeFlags struct {
	conn         *perfCLI
	subscription string
	subType      string
	position     string
	numMessages  int
	hops         bool
	queueSize    int
}

func newConsumeCommand() *cobra.Command {
	a := &consumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Receive and acknowledge messages from a topic, like pulsar-client consume",
		Long: `Subscribe to the topic, print each message as pulsar-client does, acknowledge
it, and stop after --num-messages messages (0: until SIGINT or SIGTERM), then
print "N messages successfully consumed". Besides pulsar-client's key,
properties and content, a message's line shows the region it was replicated
from, its publish time and its broker publish time, when they are set:
  ----- got message -----
  key:[k1], properties:[a=1, b=2], replicated from:[us-east], publish time:[2026-01-02T15:04:05.123Z], broker publish time:[2026-01-02T15:04:05.125Z], content:hello
For example, everything from the first message on, until interrupted:
  meridian consume persistent://public/default/t -s my-sub -p Earliest -n 0
--hops adds a line after each message with the path it took and each hop's
latency: the producer's publish time, the time the origin region stored it
(for a replicated message), the time this region ("local") stored it, and
the receipt:
  hops: producer 2026-01-02T15:04:05.100Z -> us-east 2026-01-02T15:04:05.102Z (+2ms) -> local 2026-01-02T15:04:05.131Z (+29ms) -> consumer 2026-01-02T15:04:05.133Z (+2ms)`,
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, err := oneTopic(args)
			if err != nil {
				return err
			}
			opts, err := a.options(topic)
			if err != nil {
				return err
			}
			return a.run(cmd, opts)
		},
	}
	a.conn = connectionFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&a.subscription, "subscription-name", "s", "", "the subscription's name (required)")
	f.StringVarP(&a.subType, "subscription-type", "t", "Exclusive", "Exclusive, Shared, Failover or Key_Shared")
	f.StringVarP(&a.position, "subscription-position", "p", "Latest", "where a new subscription starts: Latest or Earliest")
	f.IntVarP(&a.numMessages, "num-messages", "n", 1, "how many messages to consume (0: until SIGINT or SIGTERM)")
	f.BoolVar(&a.hops, "hops", false, "after each message, print its path (producer, origin region, this region, consumer) with each hop's time and latency")
	f.IntVarP(&a.queueSize, "queue-size", "q", 1000, "the consumer's receiver queue: messages the client prefetches")
	_ = cmd.MarkFlagRequired("subscription-name")
	return cmd
}

// options checks the flags and returns the consumer they describe.
func (a *consumeFlags) options(topic string) (pulsar.ConsumerOptions, error) {
	// AckWithResponse: an acknowledgement counts once the broker has it,
	// so what the final line counts is acknowledged when the command ends.
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: a.subscription, AckWithResponse: true}
	if strings.TrimSpace(a.subscription) == "" {
		return opts, errors.New("-s/--subscription-name: want a subscription name")
	}
	typ, ok := subscriptionTypes[strings.ToLower(a.subType)]
	if !ok {
		return opts, fmt.Errorf("-t/--subscription-type %q: unknown subscription type, want Exclusive, Shared, Failover or Key_Shared", a.subType)
	}
	opts.Type = typ
	pos, ok := subscriptionPositions[strings.ToLower(a.position)]
	if !ok {
		return opts, fmt.Errorf("-p/--subscription-position %q: want Latest or Earliest", a.position)
	}
	opts.SubscriptionInitialPosition = pos
	if a.numMessages < 0 {
		return opts, fmt.Errorf("-n/--num-messages %d: want 0 (until interrupted) or more", a.numMessages)
	}
	if a.queueSize < 1 {
		return opts, fmt.Errorf("-q/--queue-size %d: want 1 or more", a.queueSize)
	}
	opts.ReceiverQueueSize = a.queueSize
	return opts, nil
}

func (a *consumeFlags) run(cmd *cobra.Command, opts pulsar.ConsumerOptions) error {
	ctx, client, release, err := connect(cmd, a.conn)
	if err != nil {
		return err
	}
	defer release()
	consumer, err := client.Subscribe(opts)
	if err != nil {
		return a.conn.unreachable("consumer", opts.Topic, err)
	}
	defer consumer.Close()
	out := cmd.OutOrStdout()
	consumed := 0
	for a.numMessages == 0 || consumed < a.numMessages {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break // SIGINT or SIGTERM: a normal end
			}
			return fmt.Errorf("receive from %s failed after %d messages: %w", opts.Topic, consumed, err)
		}
		received := time.Now()
		writeMessage(out, msg)
		if a.hops {
			writeHops(out, msg, received)
		}
		if err := consumer.Ack(msg); err != nil {
			return fmt.Errorf("acknowledge message %s failed after %d messages: %w", msg.ID(), consumed, err)
		}
		consumed++
	}
	fmt.Fprintf(out, "%d messages successfully consumed\n", consumed)
	return nil
}

// messageTimeLayout is how a message's times print: UTC, to the
// millisecond that the protocol carries.
const messageTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// writeMessage prints msg as pulsar-client does (key "null" when there is
// none; properties sorted by key, as key=value), with the replication
// origin and the broker publish time when they are set and the publish
// time before the content, which comes last because it may span lines.
func writeMessage(w io.Writer, msg pulsar.Message) {
	var b strings.Builder
	b.WriteString("----- got message -----\n")
	key := msg.Key()
	if key == "" {
		key = "null"
	}
	fmt.Fprintf(&b, "key:[%s], ", key)
	props := msg.Properties()
	pairs := make([]string, 0, len(props))
	for k, v := range props {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs) // by key: a key holds no "="
	fmt.Fprintf(&b, "properties:[%s], ", strings.Join(pairs, ", "))
	if from := msg.GetReplicatedFrom(); from != "" {
		fmt.Fprintf(&b, "replicated from:[%s], ", from)
	}
	if t := msg.PublishTime(); !t.IsZero() {
		fmt.Fprintf(&b, "publish time:[%s], ", t.UTC().Format(messageTimeLayout))
	}
	if t := msg.BrokerPublishTime(); t != nil && !t.IsZero() {
		fmt.Fprintf(&b, "broker publish time:[%s], ", t.UTC().Format(messageTimeLayout))
	}
	fmt.Fprintf(&b, "content:%s\n", msg.Payload())
	_, _ = io.WriteString(w, b.String())
}
