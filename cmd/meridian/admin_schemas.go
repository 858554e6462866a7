package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// `meridian admin schemas`, pulsar-admin's: a topic's schema (get, upload,
// delete, test-compatibility); and the schema compatibility strategy of a
// namespace and of a topic, on `namespaces` and `topics`. pulsaradmin's
// Schema takes no context, so its calls run to its HTTP timeout.

func (a *adminCLI) schemasCommand() *cobra.Command {
	var (
		version int64
		all     bool
	)
	get := a.topicVerb("get TOPIC", "Show a topic's schema: the latest, one version (-v) or every version (-a)",
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
			path := schemaPath(t, "schema")
			switch {
			case all && version >= 0:
				return errors.New("give --version or --all-version, not both")
			case all:
				path = schemaPath(t, "schemas")
			case version >= 0:
				path += "/" + strconv.FormatInt(version, 10)
			}
			body, err := a.rawGet(ctx, path, nil)
			if err != nil {
				return err
			}
			return p.raw(body)
		})
	get.Flags().Int64VarP(&version, "version", "v", -1, "the version to show")
	get.Flags().BoolVarP(&all, "all-version", "a", false, "show every version")

	var uploadFile string
	upload := a.topicVerb("upload TOPIC", "Upload a schema for a topic from a file holding its JSON (type, schema, properties)",
		func(_ context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			payload, err := readSchemaFile(uploadFile)
			if err != nil {
				return err
			}
			return c.Schemas().CreateSchemaByPayload(t.String(), payload)
		})
	upload.Flags().StringVarP(&uploadFile, "filename", "f", "", "the schema's file (required)")

	var force bool
	del := a.topicVerb("delete TOPIC", "Delete every version of a topic's schema",
		func(_ context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			if force {
				return c.Schemas().ForceDeleteSchema(t.String())
			}
			return c.Schemas().DeleteSchema(t.String())
		})
	del.Flags().BoolVarP(&force, "force", "f", false, "delete the schema's storage too, not only mark it deleted")

	var testFile string
	test := a.topicVerb("test-compatibility TOPIC", "Check whether a schema (from a file) is compatible with a topic's",
		func(_ context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
			payload, err := readSchemaFile(testFile)
			if err != nil {
				return err
			}
			res, err := c.Schemas().TestCompatibilityWithPostSchemaPayload(t.String(), payload)
			if err != nil {
				return err
			}
			return p.object(res)
		})
	test.Flags().StringVarP(&testFile, "filename", "f", "", "the schema's file (required)")
	return group("schemas", "Manage topics' schemas", get, upload, del, test)
}

// schemaPath is the path of a topic's schema resource below the admin URL.
func schemaPath(t utils.TopicName, resource string) string {
	return "/admin/v2/schemas/" + t.GetTenant() + "/" + t.GetNamespace() + "/" + t.GetEncodedTopic() + "/" + resource
}

// readSchemaFile reads the JSON that pulsar-admin's -f takes: {"type",
// "schema", "properties"}.
func readSchemaFile(path string) (utils.PostSchemaPayload, error) {
	if path == "" {
		return utils.PostSchemaPayload{}, errors.New("give --filename (-f): a JSON file with type, schema and properties")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return utils.PostSchemaPayload{}, err
	}
	var payload utils.PostSchemaPayload
	if err := json.Unmarshal(b, &payload); err != nil || payload.SchemaType == "" {
		return utils.PostSchemaPayload{}, fmt.Errorf("%s: want JSON with type, schema and properties, e.g. {\"type\":\"STRING\",\"schema\":\"\"}", path)
	}
	return payload, nil
}

// strategyArg parses a schema compatibility strategy, in any case.
func strategyArg(flag, s string) (utils.SchemaCompatibilityStrategy, error) {
	st, err := utils.ParseSchemaCompatibilityStrategy(strings.ToUpper(s))
	if err != nil {
		return "", fmt.Errorf("%s %q: want one of ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE or UNDEFINED", flag, s)
	}
	return st, nil
}

func (a *adminCLI) namespaceSchemaStrategyCommands() []*cobra.Command {
	var strategy string
	set := a.verb("set-schema-compatibility-strategy NAMESPACE", "Set how a namespace's topics accept a new schema", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			st, err := strategyArg("--compatibility", strategy)
			if err != nil {
				return err
			}
			return c.Namespaces().SetSchemaCompatibilityStrategyWithContext(ctx, ns, st)
		})
	set.Flags().StringVarP(&strategy, "compatibility", "c", "", "the strategy, e.g. BACKWARD or FULL (required)")
	get := a.verb("get-schema-compatibility-strategy NAMESPACE", "Show how a namespace's topics accept a new schema", 1,
		func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			st, err := c.Namespaces().GetSchemaCompatibilityStrategyWithContext(ctx, ns)
			if err != nil {
				return err
			}
			return p.scalar(st.String(), st)
		})
	return []*cobra.Command{set, get}
}

func (a *adminCLI) topicSchemaStrategyCommands() []*cobra.Command {
	pol := topicPolicy{"schema-compatibility-strategy", "schemaCompatibilityStrategy", "schema compatibility strategy",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveSchemaCompatibilityStrategyWithContext(ctx, t)
		}}
	var strategy string
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		st, err := strategyArg("--strategy", strategy)
		if err != nil {
			return err
		}
		return c.SetSchemaCompatibilityStrategyWithContext(ctx, t, st)
	})
	set.Flags().StringVarP(&strategy, "strategy", "s", "", "the strategy, e.g. BACKWARD or FULL (required)")
	return a.topicPolicyCommands(pol, set)
}
