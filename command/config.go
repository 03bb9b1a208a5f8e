package command

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"gopkg.in/yaml.v3"
)

// configFlag is serve's --config: a TOML or YAML file of serve's flags.
func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", EnvVars: env("CONFIG"), Usage: "read serve's settings from this TOML (.toml) or YAML (.yaml, .yml) file, each under its flag's name (max-ttl = \"30s\"); a flag on the command line or a LEASEHOLD_ variable wins over the file (docs/operations.md)"}
}

// configurable wraps serve's flags in altsrc's types, which a config file
// can set (applyConfigFile). Call it last: the wrappers are not the types
// hidden and withoutEnv know, and unwrapFlag undoes it for who must see
// the flag's own type.
func configurable(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			out[i] = altsrc.NewStringFlag(f)
		case *cli.IntFlag:
			out[i] = altsrc.NewIntFlag(f)
		case *cli.Int64Flag:
			out[i] = altsrc.NewInt64Flag(f)
		case *cli.DurationFlag:
			out[i] = altsrc.NewDurationFlag(f)
		case *cli.BoolFlag:
			out[i] = altsrc.NewBoolFlag(f)
		default:
			panic(fmt.Sprintf("configurable: flag type %T", f))
		}
	}
	return out
}

// unwrapFlag returns the cli flag an altsrc wrapper holds, or f itself.
func unwrapFlag(f cli.Flag) cli.Flag {
	switch f := f.(type) {
	case *altsrc.StringFlag:
		return f.StringFlag
	case *altsrc.IntFlag:
		return f.IntFlag
	case *altsrc.Int64Flag:
		return f.Int64Flag
	case *altsrc.DurationFlag:
		return f.DurationFlag
	case *altsrc.BoolFlag:
		return f.BoolFlag
	}
	return f
}

// applyConfigFile sets, from the --config file, every serve flag given
// neither on the command line (before or after serve) nor in the
// environment, on c, serve's own context, where flag finds it first. A key
// that is not a serve flag is an error: altsrc itself looks up only the
// flags it knows and would skip a misspelt key without a word.
func applyConfigFile(c *cli.Context) error {
	file := flag(c, "config").String("config")
	if file == "" {
		return nil
	}
	values, err := readConfigFile(file, c.Command.Flags)
	if err != nil {
		return err
	}
	var unset []cli.Flag
	applied := map[string]bool{}
	for _, f := range c.Command.Flags {
		if name := f.Names()[0]; !setByFlagOrEnv(c, name) {
			unset = append(unset, f)
			_, applied[name] = values[name]
		}
	}
	if err := altsrc.ApplyInputSourceValues(c, altsrc.NewMapInputSource(file, values), unset); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[configFileSet] = applied
	return nil
}

// configFileSet is the App.Metadata key of the flags applyConfigFile set,
// a map[string]bool.
const configFileSet = "leasehold.config-file-set"

// fromConfigFile reports whether flag name's value came from the --config
// file.
func fromConfigFile(c *cli.Context, name string) bool {
	set, _ := c.App.Metadata[configFileSet].(map[string]bool)
	return set[name]
}

// setByFlagOrEnv reports whether flag name was given on the command line,
// before or after serve (c's lineage), or, through the top level's copy,
// in the environment.
func setByFlagOrEnv(c *cli.Context, name string) bool {
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.IsSet(name) {
			return true
		}
	}
	return false
}

// readConfigFile parses file as TOML or YAML, by its extension, into the
// map altsrc reads, and checks that every key is one of flags (--config
// aside). Integers are ints, as altsrc's Int wants; an integer for a
// string flag (maxmemory = 1000000) is its decimal string.
func readConfigFile(file string, flags []cli.Flag) (map[any]any, error) {
	// Read here, not by altsrc's loaders, which would also fetch an
	// http:// "file".
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	switch ext := strings.ToLower(filepath.Ext(file)); ext {
	case ".toml":
		err = toml.Unmarshal(b, &raw)
	case ".yaml", ".yml":
		err = yaml.Unmarshal(b, &raw)
	default:
		return nil, fmt.Errorf("config file %s: want a .toml, .yaml or .yml file, by its extension", file)
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", file, err)
	}
	kinds := map[string]cli.Flag{}
	for _, f := range flags {
		kinds[f.Names()[0]] = unwrapFlag(f)
	}
	delete(kinds, "config")
	values := make(map[any]any, len(raw))
	var unknown []string
	for key, v := range raw {
		f, ok := kinds[key]
		if !ok {
			unknown = append(unknown, key)
			continue
		}
		switch n := v.(type) {
		case int64:
			v = int(n)
		case map[string]any:
			return nil, fmt.Errorf("config file %s: %s is a table; each setting is a top-level key named as its flag", file, key)
		}
		if n, ok := v.(int); ok {
			if _, isString := f.(*cli.StringFlag); isString {
				v = strconv.Itoa(n)
			}
		}
		values[key] = v
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("config file %s: unknown setting %s: not a flag of leasehold serve (see leasehold serve --help)", file, strings.Join(unknown, ", "))
	}
	return values, nil
}
