package osbcli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Where a setting came from, lowest precedence last.
const (
	sourceFlag    = "flag"
	sourceEnv     = "env"
	sourceFile    = "file"
	sourceDefault = "default"
)

// configKey describes one setting: its name in the config file
// ("section.key"), the environment variable and global flag that may set
// it, its default, and how a value is checked.
type configKey struct {
	name  string
	env   string // "" when no variable sets it
	flag  string // "" when no global flag sets it
	def   string
	kind  string // "string", "bool", "seconds", "timeout", "protocol"
	about string
}

// configKeys lists every key the config file may hold, in file order.
var configKeys = []configKey{
	{name: "connection.api_key", env: "OPEN_SANDBOX_API_KEY", flag: "api-key", kind: "string", about: "API key sent as OPEN-SANDBOX-API-KEY"},
	{name: "connection.domain", env: "OPEN_SANDBOX_DOMAIN", flag: "domain", def: "localhost:8080", kind: "domain", about: "server address, host[:port]"},
	{name: "connection.protocol", env: "OPEN_SANDBOX_PROTOCOL", flag: "protocol", def: "http", kind: "protocol", about: "http or https"},
	{name: "connection.request_timeout", env: "OPEN_SANDBOX_REQUEST_TIMEOUT", flag: "request-timeout", def: "30", kind: "seconds", about: "timeout of non-streaming requests, seconds (0 = none)"},
	{name: "connection.use_server_proxy", env: "OPEN_SANDBOX_USE_SERVER_PROXY", flag: "use-server-proxy", def: "false", kind: "bool", about: "reach sandboxes through the server's proxy route"},
	{name: "output.color", flag: "no-color", def: "true", kind: "bool", about: "colour in tables (also off with NO_COLOR or when stdout is not a terminal)"},
	{name: "defaults.image", kind: "string", about: "image for `sandbox create` without --image"},
	{name: "defaults.timeout", def: "10m", kind: "timeout", about: "sandbox timeout for `sandbox create` (a duration or \"none\")"},
}

func lookupKey(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	// A bare key is accepted when it names one setting only.
	var found []configKey
	for _, k := range configKeys {
		if _, key, _ := strings.Cut(k.name, "."); key == name {
			found = append(found, k)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return configKey{}, false
}

func keyNames() []string {
	names := make([]string, len(configKeys))
	for i, k := range configKeys {
		names[i] = k.name
	}
	return names
}

// settings is the resolved configuration of one osb invocation.
type settings struct {
	APIKey         string
	Domain         string
	Protocol       string
	RequestTimeout time.Duration
	UseServerProxy bool
	Color          bool
	DefaultImage   string
	DefaultTimeout string // a duration or "none"

	// values and sources hold every key as text and where it came from,
	// for `config show`.
	values  map[string]string
	sources map[string]string
	path    string // the config file consulted
}

// configInputs are the layers settings are resolved from.
type configInputs struct {
	flags map[string]string // global flag name -> value, only flags given
	env   func(string) (string, bool)
	file  map[string]string // "section.key" -> value as text
	path  string
}

// resolve applies flags > env > file > defaults and checks every value.
func resolve(in configInputs) (settings, error) {
	s := settings{values: map[string]string{}, sources: map[string]string{}, path: in.path}
	if in.env == nil {
		in.env = func(string) (string, bool) { return "", false }
	}
	for _, k := range configKeys {
		v, src := k.def, sourceDefault
		if fv, ok := in.file[k.name]; ok {
			v, src = fv, sourceFile
		}
		if k.env != "" {
			if ev, ok := in.env(k.env); ok && ev != "" {
				v, src = ev, sourceEnv
			}
		}
		if k.flag != "" {
			if fv, ok := in.flags[k.flag]; ok {
				v, src = fv, sourceFlag
				if k.flag == "no-color" {
					// --no-color is the negation of output.color.
					b, err := strconv.ParseBool(fv)
					if err != nil {
						return s, fmt.Errorf("--no-color: %w", err)
					}
					v = strconv.FormatBool(!b)
				}
			}
		}
		if err := checkValue(k, v); err != nil {
			return s, fmt.Errorf("%s (from %s): %w", k.name, describeSource(src, k, in.path), err)
		}
		s.values[k.name], s.sources[k.name] = v, src
	}
	if v, ok := in.env("NO_COLOR"); ok && v != "" && s.sources["output.color"] != sourceFlag {
		s.values["output.color"], s.sources["output.color"] = "false", sourceEnv
	}
	s.APIKey = s.values["connection.api_key"]
	s.Domain = s.values["connection.domain"]
	s.Protocol = strings.ToLower(s.values["connection.protocol"])
	s.RequestTimeout, _ = parseSeconds(s.values["connection.request_timeout"])
	s.UseServerProxy, _ = strconv.ParseBool(s.values["connection.use_server_proxy"])
	s.Color, _ = strconv.ParseBool(s.values["output.color"])
	s.DefaultImage = s.values["defaults.image"]
	s.DefaultTimeout = s.values["defaults.timeout"]
	return s, nil
}

func describeSource(src string, k configKey, path string) string {
	switch src {
	case sourceFlag:
		return "--" + k.flag
	case sourceEnv:
		return k.env
	case sourceFile:
		return path
	}
	return "default"
}

// checkValue validates a setting's text.
func checkValue(k configKey, v string) error {
	switch k.kind {
	case "bool":
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
	case "seconds":
		if _, err := parseSeconds(v); err != nil {
			return err
		}
	case "timeout":
		if _, _, err := parseSandboxTimeout(v); err != nil {
			return err
		}
	case "protocol":
		if p := strings.ToLower(v); p != "http" && p != "https" {
			return fmt.Errorf("want http or https, got %q", v)
		}
	case "domain":
		if v == "" {
			return errors.New("must not be empty")
		}
		d := v
		if !strings.Contains(d, "://") {
			d = "http://" + d
		}
		if u, err := url.Parse(d); err != nil || u.Host == "" {
			return fmt.Errorf("want host[:port], got %q", v)
		}
	}
	return nil
}

// parseSeconds reads a request timeout: a number of seconds ("30",
// "2.5") or a Go duration ("1m30s"). Zero means no timeout.
func parseSeconds(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("must not be negative, got %q", v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want seconds (30) or a duration (1m30s), got %q", v)
	}
	return d, nil
}

// parseSandboxTimeout reads a sandbox timeout: a duration ("10m", "2h",
// bare seconds "600") or "none" for a sandbox that never expires.
func parseSandboxTimeout(v string) (d time.Duration, none bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none", "never", "manual":
		return 0, true, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return time.Duration(n) * time.Second, false, nil
	}
	d, err = time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("want a positive duration (30m, 2h) or \"none\", got %q", v)
	}
	return d, false, nil
}

// defaultConfigPath is ~/.opensandbox/config.toml.
func defaultConfigPath(home string) string {
	return filepath.Join(home, ".opensandbox", "config.toml")
}

// readConfigFile loads a config file as flat "section.key" -> text. A
// missing file is no error when it is the default path (mustExist false).
// Unknown sections or keys are an error naming them.
func readConfigFile(path string, mustExist bool) (map[string]string, error) {
	raw, err := readConfigTree(path)
	if errors.Is(err, fs.ErrNotExist) && !mustExist {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var unknown []string
	for section, v := range raw {
		tbl, ok := v.(map[string]any)
		if !ok {
			unknown = append(unknown, section)
			continue
		}
		for key, val := range tbl {
			name := section + "." + key
			if _, ok := lookupExact(name); !ok {
				unknown = append(unknown, name)
				continue
			}
			out[name] = valueText(val)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("config file %s: unknown keys: %s (known: %s)", path, strings.Join(unknown, ", "), strings.Join(keyNames(), ", "))
	}
	return out, nil
}

func lookupExact(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	return configKey{}, false
}

// readConfigTree decodes a config file into nested maps.
func readConfigTree(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	raw := map[string]any{}
	if _, err := toml.Decode(string(b), &raw); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return raw, nil
}

func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// typedValue turns a checked value into what the file stores.
func typedValue(k configKey, v string) any {
	switch k.kind {
	case "bool":
		b, _ := strconv.ParseBool(v)
		return b
	case "seconds":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	case "protocol":
		return strings.ToLower(v)
	}
	return v
}

// setConfigValue validates key and value and writes them into the file
// at path, keeping the other keys. The file is created (0600) if needed.
func setConfigValue(path, name, value string) (configKey, error) {
	k, ok := lookupKey(name)
	if !ok {
		return k, fmt.Errorf("unknown key %q (known: %s)", name, strings.Join(keyNames(), ", "))
	}
	if err := checkValue(k, value); err != nil {
		return k, fmt.Errorf("%s: %w", k.name, err)
	}
	tree, err := readConfigTree(path)
	if errors.Is(err, fs.ErrNotExist) {
		tree, err = map[string]any{}, nil
	}
	if err != nil {
		return k, err
	}
	// Refuse to rewrite a file that already holds unknown keys.
	if _, err := readConfigFile(path, false); err != nil {
		return k, err
	}
	section, key, _ := strings.Cut(k.name, ".")
	tbl, _ := tree[section].(map[string]any)
	if tbl == nil {
		tbl = map[string]any{}
		tree[section] = tbl
	}
	tbl[key] = typedValue(k, value)
	return k, writeConfigTree(path, tree)
}

func writeConfigTree(path string, tree map[string]any) error {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(tree); err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	return writeConfigBytes(path, buf.Bytes())
}

func writeConfigBytes(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write config file: %w", err)
	}
	return nil
}

// configTemplate is what `config init` writes.
const configTemplate = `# osb configuration. Precedence: command-line flags > environment
# (OPEN_SANDBOX_*) > this file > built-in defaults.

[connection]
# api_key = ""                 # OPEN_SANDBOX_API_KEY
domain = "localhost:8080"      # OPEN_SANDBOX_DOMAIN
protocol = "http"              # OPEN_SANDBOX_PROTOCOL: http or https
request_timeout = 30           # seconds; OPEN_SANDBOX_REQUEST_TIMEOUT
use_server_proxy = false       # OPEN_SANDBOX_USE_SERVER_PROXY

[output]
color = true

[defaults]
# image = "opensandbox/base:latest"
timeout = "10m"                # or "none" for sandboxes that never expire
`
