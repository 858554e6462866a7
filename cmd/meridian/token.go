package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
)

// newTokenCommand is `meridian token`, the counterpart of `pulsar tokens`:
// the keys and tokens it makes work with Pulsar brokers and clients, and
// Pulsar's work with Meridian. Key arguments take the forms of the broker's
// tokenSecretKey and tokenPublicKey settings (data:;base64,…, file:///…, or
// a path).
func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make and inspect JWT authentication tokens (like `pulsar tokens`)",
		Long: `Make and inspect the JWT tokens of the "token" authentication method.

With a shared secret:
  meridian token create-secret-key --output my-secret.key
  meridian token create --secret-key file:///path/to/my-secret.key --subject alice --expiry-time 30d
and the broker's tokenSecretKey is file:///path/to/my-secret.key.

With a key pair (only the broker's public key can verify; only the issuer can sign):
  meridian token create-key-pair --output-private-key my-private.key --output-public-key my-public.key
  meridian token create --private-key file:///path/to/my-private.key --subject alice
and the broker's tokenPublicKey is file:///path/to/my-public.key.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newTokenCreateSecretKeyCommand(), newTokenCreateKeyPairCommand(),
		newTokenCreateCommand(), newTokenShowCommand(), newTokenValidateCommand())
	return cmd
}

func newTokenCreateSecretKeyCommand() *cobra.Command {
	var (
		output string
		b64    bool
	)
	cmd := &cobra.Command{
		Use:   "create-secret-key",
		Short: "Make a random 256-bit secret key for HS256 tokens",
		Long: `Make a random 32-byte secret key for HS256 tokens. The key is written raw, as
Pulsar writes it, to --output or stdout; --base64 writes it base64-encoded,
for a data:;base64,<key> setting. Keep it secret: anyone holding it can mint
tokens for any role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := auth.GenerateSecretKey()
			if b64 {
				key = []byte(base64.StdEncoding.EncodeToString(key) + "\n")
			}
			if output == "" {
				_, err := cmd.OutOrStdout().Write(key)
				return err
			}
			return writeNewFile(output, key, 0o600)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write the key to (default: stdout); an existing file is not overwritten")
	cmd.Flags().BoolVarP(&b64, "base64", "b", false, "write the key base64-encoded instead of raw")
	return cmd
}

func newTokenCreateKeyPairCommand() *cobra.Command {
	var alg, privOut, pubOut string
	cmd := &cobra.Command{
		Use:   "create-key-pair",
		Short: "Make a key pair for RS256 or ES256 tokens",
		Long: `Make a key pair: the private key (PKCS#8 DER) signs tokens and stays with
their issuer; the public key (X.509 SubjectPublicKeyInfo DER) is the
broker's tokenPublicKey. The formats are those of ` + "`pulsar tokens create-key-pair`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if privOut == "" || pubOut == "" {
				return errors.New("--output-private-key and --output-public-key are both required")
			}
			priv, pub, err := auth.GenerateKeyPair(alg)
			if err != nil {
				return err
			}
			if err := writeNewFile(privOut, priv, 0o600); err != nil {
				return err
			}
			return writeNewFile(pubOut, pub, 0o644)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&alg, "algorithm", "a", "RS256", "RS256, RS384, RS512 (RSA of 2048, 3072, 4096 bits), ES256, ES384 or ES512")
	f.StringVar(&privOut, "output-private-key", "", "file to write the private key to (required); an existing file is not overwritten")
	f.StringVar(&pubOut, "output-public-key", "", "file to write the public key to (required); an existing file is not overwritten")
	return cmd
}

func newTokenCreateCommand() *cobra.Command {
	var (
		subject, secretKey, privateKey, expiry, alg string
		headers                                     map[string]string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Make a token for a role, signed with a secret or a private key",
		Long: `Make a token whose "sub" claim is --subject, the role the broker gives its
holder. Sign it with --secret-key (HS256 by default) or --private-key (RS256
for an RSA key, the curve's ES* for an EC key, by default). Without
--expiry-time the token never expires: it is valid until its key changes.`,
		Example: `  meridian token create --secret-key file:///etc/meridian/secret.key --subject alice --expiry-time 30d
  meridian token create --private-key my-private.key --subject ci-bot --expiry-time 2h --header kid=2026-03`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if subject == "" {
				return errors.New("--subject is required: it is the role the token grants")
			}
			setting, which, err := oneKey("--secret-key", secretKey, "--private-key", privateKey)
			if err != nil {
				return err
			}
			key, err := auth.ReadKey(setting)
			if err != nil {
				return fmt.Errorf("%s: %w", which, err)
			}
			// Each flag means one kind of key: CreateToken's guess from an
			// empty alg would sign with a "private key" that is not one as if
			// it were a secret.
			switch {
			case which == "--private-key" && strings.HasPrefix(alg, "HS"):
				return fmt.Errorf("--algorithm %s needs --secret-key, not --private-key", alg)
			case which == "--private-key":
				if _, err := auth.ParsePrivateKey(key); err != nil {
					return fmt.Errorf("--private-key: %w", err)
				}
			case alg == "":
				alg = "HS256"
			}
			var exp time.Time
			if expiry != "" {
				d, err := parseRelativeTime(expiry)
				if err != nil {
					return fmt.Errorf("--expiry-time: %w", err)
				}
				exp = time.Now().Add(d)
			}
			hs := map[string]any{}
			for k, v := range headers {
				hs[k] = v
			}
			tok, err := auth.CreateToken(key, alg, subject, exp, hs)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&subject, "subject", "s", "", "the role the token grants (its sub claim; required)")
	f.StringVar(&secretKey, "secret-key", "", "secret key to sign with: data:;base64,…, file:///… or a path")
	f.StringVar(&privateKey, "private-key", "", "private key (DER or PEM) to sign with: data:;base64,…, file:///… or a path")
	f.StringVarP(&expiry, "expiry-time", "e", "", "lifetime: a number and s, m, h, d, w or y (e.g. 30d, 1y); default: never expires")
	f.StringVarP(&alg, "algorithm", "a", "", "HS256/384/512 with --secret-key; RS*, PS* or ES* with --private-key (default: from the key)")
	f.StringToStringVar(&headers, "header", nil, "extra JOSE header, key=value (e.g. kid=2026-03); repeatable")
	return cmd
}

func newTokenShowCommand() *cobra.Command {
	var tokenFile string
	cmd := &cobra.Command{
		Use:   "show [TOKEN]",
		Short: "Print a token's header and claims, WITHOUT verifying it",
		Long: `Print a token's header and claims as JSON. Nothing is verified: use
` + "`meridian token validate`" + ` to check a token against a key.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := tokenArg(args, tokenFile)
			if err != nil {
				return err
			}
			header, claims, err := auth.DecodeUnverified(tok)
			if err != nil {
				return err
			}
			out, err := json.MarshalIndent(map[string]any{"header": header, "claims": claims}, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", out)
			return err
		},
	}
	cmd.Flags().StringVarP(&tokenFile, "token-file", "f", "", "read the token from this file instead of the argument")
	return cmd
}

func newTokenValidateCommand() *cobra.Command {
	var tokenFile, secretKey, publicKey, roleClaim string
	cmd := &cobra.Command{
		Use:   "validate [TOKEN]",
		Short: "Check a token as a broker would, with a secret or a public key",
		Long: `Check a token's signature, algorithm and expiry as a broker configured with
the same key would, and print the role it grants. Exits non-zero, saying why,
if the broker would refuse it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := tokenArg(args, tokenFile)
			if err != nil {
				return err
			}
			setting, which, err := oneKey("--secret-key", secretKey, "--public-key", publicKey)
			if err != nil {
				return err
			}
			cfg := auth.DefaultTokenConfig()
			cfg.RoleClaim = roleClaim
			if which == "--secret-key" {
				cfg.SecretKey = setting
			} else {
				cfg.PublicKey = setting
			}
			p, err := auth.NewToken(cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", which, err)
			}
			info, err := p.Verify(tok)
			if err != nil {
				return err
			}
			expires := "never"
			if !info.ExpiresAt.IsZero() {
				expires = info.ExpiresAt.UTC().Format(time.RFC3339)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "valid: role %q, expires %s\n", info.Role, expires)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&tokenFile, "token-file", "f", "", "read the token from this file instead of the argument")
	f.StringVar(&secretKey, "secret-key", "", "secret key to verify with: data:;base64,…, file:///… or a path")
	f.StringVar(&publicKey, "public-key", "", "public key (DER or PEM) to verify with: data:;base64,…, file:///… or a path")
	f.StringVar(&roleClaim, "role-claim", "sub", "claim holding the role (the broker's tokenAuthClaim)")
	return cmd
}

// oneKey returns whichever of two exclusive key flags is set.
func oneKey(nameA, a, nameB, b string) (setting, name string, err error) {
	switch {
	case a != "" && b != "":
		return "", "", fmt.Errorf("give %s or %s, not both", nameA, nameB)
	case a != "":
		return a, nameA, nil
	case b != "":
		return b, nameB, nil
	}
	return "", "", fmt.Errorf("a key is required: give %s or %s", nameA, nameB)
}

// tokenArg returns the token from the one argument or from --token-file.
func tokenArg(args []string, file string) (string, error) {
	switch {
	case len(args) == 1 && file != "":
		return "", errors.New("give the token as an argument or with --token-file, not both")
	case len(args) == 1:
		return strings.TrimSpace(args[0]), nil
	case file == "":
		return "", errors.New("no token: give it as an argument or with --token-file")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// parseRelativeTime parses a lifetime as `pulsar tokens create
// --expiry-time` does (RelativeTimeUtil): a positive integer and one of s,
// m, h, d, w, y (365 days); a bare number is seconds.
func parseRelativeTime(s string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour,
		'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour, 'y': 365 * 24 * time.Hour}
	s = strings.TrimSpace(s)
	unit := time.Second
	if s != "" {
		if u, ok := units[s[len(s)-1]]; ok {
			unit, s = u, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive number and one of s, m, h, d, w, y (e.g. 30d)")
	}
	if n > int64(200*365*24*time.Hour/unit) {
		return 0, errors.New("more than 200 years; for a token that never expires, leave --expiry-time out")
	}
	return time.Duration(n) * unit, nil
}

// writeNewFile writes a key to a file that must not exist yet: overwriting
// a key by mistake would invalidate every token made with it.
func writeNewFile(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; remove it first if you mean to replace that key", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
