package ociimage

import (
	"os"
	"path/filepath"
	"testing"
)

// What the runtime reads from the image's config: the entrypoint, the user,
// the environment and the stop signal (the console's nginx stops on
// SIGQUIT, not the runtime's default SIGTERM).
func TestConfigCarriesWhatTheRuntimeReads(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := Image(Config{Files: []File{{Path: "/usr/local/bin/prog", Source: bin}}, User: "65532:65532",
		Env: []string{"A=b"}, StopSignal: "SIGQUIT"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/prog" || c.User != "65532:65532" ||
		len(c.Env) != 1 || c.Env[0] != "A=b" || c.StopSignal != "SIGQUIT" || cf.OS != "linux" {
		t.Errorf("config %+v, os %q", c, cf.OS)
	}
}
