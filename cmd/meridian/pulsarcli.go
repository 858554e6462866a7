package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Meridian's container image (deploy/Containerfile) is a drop-in for
// Pulsar's apachepulsar/pulsar where tests and tools start a standalone
// with Pulsar's own command line: its working directory is /pulsar,
// /pulsar/bin/pulsar is this binary, and `bin/pulsar standalone -nfw`
// starts `meridian standalone` as Pulsar's standalone would listen
// (0.0.0.0:6650 and 0.0.0.0:8080). The image's entrypoint is this binary,
// so a command line naming a Meridian command runs it, and one naming
// bin/pulsar is Pulsar's. commandLine does that rewriting.

// pulsarStandaloneDefaults are Pulsar's standalone's listeners and data,
// under the working directory (/pulsar in the image). Lookups tell
// clients to come through the service URL they were given: behind a port
// mapping the broker cannot know the host port clients reach it on, and a
// standalone is the only broker its clients can mean.
var pulsarStandaloneDefaults = []string{
	"--broker-listen", "0.0.0.0:6650", "--web-listen", "0.0.0.0:8080",
	"--advertised-address", "localhost", "--proxy-through-service-url",
	"--data-dir", filepath.Join("data", "standalone"),
}

// pulsarStandaloneConf is where Pulsar's standalone reads its settings
// from; when the file exists (a user mounts theirs), it is --config.
var pulsarStandaloneConf = filepath.Join("conf", "standalone.conf")

// commandLine is the meridian command line for a process started as
// argv0 with args: Pulsar's (`bin/pulsar ARGS`, or this binary started as
// "pulsar"), a Meridian command given after the binary's name
// (`meridian broker ...` to an image whose entrypoint is already
// meridian), or args as they are.
func commandLine(argv0 string, args []string) ([]string, error) {
	if filepath.Base(argv0) == "pulsar" {
		return pulsarCommandLine(args)
	}
	if len(args) > 0 {
		switch filepath.Base(args[0]) {
		case "pulsar":
			return pulsarCommandLine(args[1:])
		case "meridian":
			return args[1:], nil
		}
	}
	return args, nil
}

// pulsarCommandLine maps Pulsar's `bin/pulsar standalone` and its flags
// onto `meridian standalone`; it refuses Pulsar's other commands and the
// flags it cannot honour, saying what to run instead.
func pulsarCommandLine(args []string) ([]string, error) {
	if len(args) == 0 || args[0] != "standalone" {
		return nil, fmt.Errorf("this is Meridian's image: bin/pulsar runs only `bin/pulsar standalone` (Pulsar's standalone, as a drop-in); run Meridian's own commands instead (meridian --help), e.g. `meridian broker --region R --etcd URL`, got bin/pulsar %s", strings.Join(args, " "))
	}
	out := append([]string{"standalone"}, pulsarStandaloneDefaults...)
	config := ""
	if _, err := os.Stat(pulsarStandaloneConf); err == nil {
		config = pulsarStandaloneConf
	}
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		flag, value, hasValue := strings.Cut(rest[i], "=")
		take := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(rest) {
				return "", fmt.Errorf("bin/pulsar standalone: %s needs a value", flag)
			}
			i++
			return rest[i], nil
		}
		switch flag {
		case "-nfw", "--no-functions-worker", "-nss", "--no-stream-storage", "--only-broker":
			// Meridian runs neither functions nor stream storage: the
			// flags ask for what it does anyway.
		case "--num-bookies", "--bookkeeper-dir", "--bookkeeper-port", "--zookeeper-dir", "--zookeeper-port",
			"--stream-storage-port", "--metadata-dir":
			// Storage layout of Pulsar's own parts: Meridian's standalone
			// keeps everything under its data directory.
			if _, err := take(); err != nil {
				return nil, err
			}
		case "-c", "--config":
			v, err := take()
			if err != nil {
				return nil, err
			}
			config = v
		case "-a", "--advertised-address":
			v, err := take()
			if err != nil {
				return nil, err
			}
			out = append(out, "--advertised-address", v)
		case "--wipe-data":
			if err := os.RemoveAll(filepath.Join("data", "standalone")); err != nil {
				return nil, fmt.Errorf("bin/pulsar standalone --wipe-data: %w", err)
			}
		default:
			return nil, fmt.Errorf("bin/pulsar standalone: Meridian does not take Pulsar's flag %q; it takes -nfw, -nss, --only-broker, -c/--config, -a/--advertised-address, --wipe-data, and ignores Pulsar's storage layout flags (meridian standalone --help lists its own)", rest[i])
		}
	}
	if config != "" {
		out = append(out, "--config", config)
	}
	return out, nil
}
