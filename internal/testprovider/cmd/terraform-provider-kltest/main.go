// Command terraform-provider-kltest is Kilolock's test provider
// (internal/testprovider): Terraform starts it as a plugin. Run by hand
// with -mirror DIR, it lays out a filesystem mirror holding itself in DIR,
// with a CLI configuration DIR/kltest.tfrc that installs it from there
// (`make tools` does this into bin/kltest-mirror).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/kilolock/kilolock/internal/testprovider"
)

func main() {
	mirror := flag.String("mirror", "", "write a filesystem mirror holding this provider into `DIR`, with DIR/"+testprovider.CLIConfigName+", and exit")
	cache := flag.String("plugin-cache-dir", "", "with -mirror: the plugin_cache_dir of the CLI configuration (created when missing)")
	flag.Parse()
	if err := run(*mirror, *cache); err != nil {
		fmt.Fprintln(os.Stderr, "terraform-provider-kltest:", err)
		os.Exit(1)
	}
}

func run(mirror, cache string) error {
	if mirror == "" {
		return providerserver.Serve(context.Background(), testprovider.New(testprovider.Version),
			providerserver.ServeOpts{Address: testprovider.Source})
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if mirror, err = filepath.Abs(mirror); err != nil {
		return err
	}
	if err := testprovider.WriteMirror(mirror, self); err != nil {
		return err
	}
	if cache != "" {
		if cache, err = filepath.Abs(cache); err != nil {
			return err
		}
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return err
		}
	}
	cfg := filepath.Join(mirror, testprovider.CLIConfigName)
	if err := os.WriteFile(cfg, []byte(testprovider.CLIConfig(mirror, cache)), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s %s in %s\nexport TF_CLI_CONFIG_FILE=%s\n", testprovider.Source, testprovider.Version, mirror, cfg)
	return nil
}
