package testprovider

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
)

// Platform is Terraform's name of this machine's platform (OS_ARCH), the
// one a mirror holds the provider for.
const Platform = runtime.GOOS + "_" + runtime.GOARCH

// CLIConfigName is the file name of the CLI configuration WriteMirror
// writes beside the mirror.
const CLIConfigName = "kltest.tfrc"

// MirrorPackage is the path, relative to a filesystem mirror's root, of the
// provider's package in Terraform's packed layout:
// HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip.
// The packed layout makes `terraform init` install the provider the way it
// installs a registry download (unzip into the plugin cache dir, then link),
// where an unpacked layout would be linked in place.
func MirrorPackage() string {
	return filepath.Join(Hostname, Namespace, Type, "terraform-provider-"+Type+"_"+Version+"_"+Platform+".zip")
}

// WriteMirror lays out a filesystem mirror in dir holding the provider
// executable binary (MirrorPackage: one zip entry,
// terraform-provider-kltest_vVERSION, mode 0755, a fixed time: the same
// binary always gives the same zip, so lock file hashes stay valid). dir is
// created when missing.
func WriteMirror(dir, binary string) error {
	zipPath := filepath.Join(dir, MirrorPackage())
	if err := os.MkdirAll(filepath.Dir(zipPath), 0o755); err != nil {
		return fmt.Errorf("writing provider mirror: %w", err)
	}
	in, err := os.Open(binary)
	if err != nil {
		return fmt.Errorf("writing provider mirror: %w", err)
	}
	defer in.Close()
	out, err := os.Create(zipPath)
	if err != nil {
		return fmt.Errorf("writing provider mirror: %w", err)
	}
	zw := zip.NewWriter(out)
	h := &zip.FileHeader{Name: "terraform-provider-" + Type + "_v" + Version, Method: zip.Store,
		Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing provider mirror %s: %w", zipPath, err)
	}
	return nil
}

// CLIConfig is a Terraform CLI configuration (TF_CLI_CONFIG_FILE) that
// installs this provider from the filesystem mirror at mirror and never
// looks it up on a network (its hostname is excluded from direct
// installation; other providers install as usual), with cacheDir as the
// plugin cache dir (Terraform requires it to exist; "" leaves it out).
func CLIConfig(mirror, cacheDir string) string {
	s := "# Kilolock's test provider " + Source + " from a filesystem mirror.\n" +
		"provider_installation {\n" +
		"  filesystem_mirror {\n" +
		"    path    = " + strconv.Quote(mirror) + "\n" +
		"    include = [" + strconv.Quote(Source) + "]\n" +
		"  }\n" +
		"  direct {\n" +
		"    exclude = [" + strconv.Quote(Hostname+"/*/*") + "]\n" +
		"  }\n" +
		"}\n"
	if cacheDir != "" {
		s += "plugin_cache_dir = " + strconv.Quote(cacheDir) + "\n"
	}
	return s
}

// RequiredProvidersBlock is the terraform block a configuration using the
// provider declares.
const RequiredProvidersBlock = `terraform {
  required_providers {
    kltest = {
      source  = "` + Source + `"
      version = "` + Version + `"
    }
  }
}
`
