package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Root is the prefix of every Meridian key (DESIGN §3).
const Root = "/meridian"

// Key builds a key from name segments: "/" + each segment path-escaped and
// joined with "/". Escaping (url.PathEscape) turns a "/" inside a name into
// "%2F", so every segment stays one segment and a prefix scan of "t/" never
// matches the key of a name "t2".
//
//	Key("meridian", "regions", "us-east", "ledgers", "42") == "/meridian/regions/us-east/ledgers/42"
func Key(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// GlobalKey is a key under /meridian/global/, shared by all regions:
// GlobalKey("tenants", tenant), GlobalKey("namespaces", tenant, ns).
func GlobalKey(parts ...string) string {
	return Root + "/global" + Key(parts...)
}

// RegionKey is a key under /meridian/regions/<region>/, one region's runtime
// state: RegionKey(r, "bookies", id), RegionKey(r, "ledgers", id).
func RegionKey(region string, parts ...string) string {
	return Root + "/regions" + Key(append([]string{region}, parts...)...)
}

// Prefix turns a key into the prefix of the keys below it, for List and
// Watch: Prefix(RegionKey(r, "bookies")) lists the bookies and nothing else.
func Prefix(key string) string {
	if strings.HasSuffix(key, "/") {
		return key
	}
	return key + "/"
}

// Name returns the unescaped last segment of key, for example a bookie id
// from a key found by List.
func Name(key string) (string, error) {
	seg := key[strings.LastIndexByte(key, '/')+1:]
	name, err := url.PathUnescape(seg)
	if err != nil {
		return "", fmt.Errorf("meta: key %q: bad escaped name: %w", key, err)
	}
	return name, nil
}

// EncodeJSON marshals v, which must encode as a JSON object, with a leading
// "v": version field (DESIGN §3: values are versioned so that formats can
// evolve). v itself should not have a "v" field.
func EncodeJSON(version int, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("meta: encode value: %w", err)
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("meta: encode value: %T is not a JSON object", v)
	}
	out := fmt.Appendf(nil, `{"v":%d`, version)
	if inner := body[1 : len(body)-1]; len(bytes.TrimSpace(inner)) > 0 {
		out = append(out, ',')
		out = append(out, inner...)
	}
	return append(out, '}'), nil
}

// DecodeJSON reads the value's "v" field and, when it is between 1 and
// maxVersion, unmarshals the value into v and returns the version, so that
// the caller can upgrade older formats. A missing or newer version is
// ErrValueVersion.
func DecodeJSON(data []byte, maxVersion int, v any) (int, error) {
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(data, &hdr); err != nil {
		return 0, fmt.Errorf("meta: decode value: %w", err)
	}
	if hdr.V < 1 || hdr.V > maxVersion {
		return hdr.V, fmt.Errorf("%w: value has v=%d, this binary reads 1..%d", ErrValueVersion, hdr.V, maxVersion)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return hdr.V, fmt.Errorf("meta: decode value v%d: %w", hdr.V, err)
	}
	return hdr.V, nil
}
