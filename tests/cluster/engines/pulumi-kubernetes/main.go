// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider plugin, built from
// github.com/pulumi/pulumi-kubernetes/provider/v4 at the version go.mod pins.
//
// Upstream's own main package (cmd/pulumi-resource-kubernetes/main.go at the pin) cannot be built from the module
// cache: it embeds schema-embed.json and terraform-mapping-embed.json (`//go:embed`), which its `go:generate` step
// (cmd/pulumi-resource-kubernetes/generate.go, run by upstream's Makefile with VERSION set) writes from schema.json and
// terraform-mapping.json, and the module zip ships only those two sources. `go build` of it stops at "pattern
// schema-embed.json: no matching files found". So this main calls the same provider.Serve with the same two documents,
// read at start from the module cache where go.mod's pin of the provider module lies (its schema.json and
// terraform-mapping.json), and gives the schema the version generate.go would: the provider's version.Version.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

const providerModule = "github.com/pulumi/pulumi-kubernetes/provider/v4"

func main() {
	dir, err := moduleDir()
	if err != nil {
		fail(err)
	}
	command := filepath.Join(dir, "cmd", "pulumi-resource-kubernetes")
	schema, err := os.ReadFile(filepath.Join(command, "schema.json"))
	if err != nil {
		fail(err)
	}
	mapping, err := os.ReadFile(filepath.Join(command, "terraform-mapping.json"))
	if err != nil {
		fail(err)
	}
	schema, err = withVersion(schema, version.Version)
	if err != nil {
		fail(err)
	}
	// "kubernetes": upstream main.go's providerName.
	provider.Serve("kubernetes", version.Version, schema, mapping)
}

// moduleDir is where Go's module cache holds the provider module this binary was linked from (its build info names
// the version), as `go mod download` extracted and checked it. The path needs no case-escaping: neither the module
// path nor a semantic version has an upper-case letter.
func moduleDir() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build info")
	}
	for _, dep := range info.Deps {
		if dep.Path != providerModule {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOMODCACHE (the provider's schema is read from Go's module cache): %w", err)
		}
		dir := filepath.Join(strings.TrimSpace(string(cache)), filepath.FromSlash(dep.Path)+"@"+dep.Version)
		if _, err := os.Stat(dir); err != nil {
			return "", fmt.Errorf("%w: run `go mod download %s` in tests/cluster/engines/pulumi-kubernetes", err, providerModule)
		}
		return dir, nil
	}
	return "", fmt.Errorf("build info has no dependency %s", providerModule)
}

// withVersion is schema.json with its top-level "version" set, as generate.go sets PackageSpec.Version before it
// re-serialises the schema; schema.json has none. The key is spliced in rather than the 7 MB document decoded and
// re-encoded (about 0.13 s at every start): the same JSON object, other than generate.go's key order and whitespace.
// schema.json is a non-empty object (upstream's schema of every Kubernetes kind), so the comma is always followed by
// a key.
func withVersion(schema []byte, version string) ([]byte, error) {
	open := bytes.IndexByte(schema, '{')
	if open < 0 {
		return nil, fmt.Errorf("schema.json: not a JSON object")
	}
	value, err := json.Marshal(version)
	if err != nil {
		return nil, err
	}
	spliced := make([]byte, 0, len(schema)+len(value)+16)
	spliced = append(spliced, schema[:open+1]...)
	spliced = append(spliced, `"version":`...)
	spliced = append(spliced, value...)
	spliced = append(spliced, ',')
	spliced = append(spliced, schema[open+1:]...)
	return spliced, nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes: %v\n", err)
	os.Exit(1)
}
