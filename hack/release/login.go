package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// loginCmd stores a registry's credentials in the Docker config file
// ($DOCKER_CONFIG/config.json), which push's default keychain reads: CI logs
// in without a Docker daemon or CLI. The password comes from stdin only, so
// it is never on a command line.
func loginCmd(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("login", flag.ExitOnError)
	registry := fs.String("registry", "", "registry host (default: Docker Hub's)")
	username := fs.String("username", "", "user name (the password is read from stdin)")
	fs.Parse(args)
	b, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	password := strings.TrimRight(string(b), "\r\n")
	if *username == "" || password == "" {
		return errors.New("login: a -username and a password on stdin are required")
	}
	reg, err := name.NewRegistry(*registry)
	if err != nil {
		return err
	}
	server := reg.Name()
	cf, err := config.Load(os.Getenv("DOCKER_CONFIG"))
	if err != nil {
		return err
	}
	store := cf.GetCredentialsStore(server)
	// Docker Hub's credentials live under the key Docker's tools use for it.
	if server == name.DefaultRegistry {
		server = authn.DefaultAuthKey
	}
	if err := store.Store(types.AuthConfig{ServerAddress: server, Username: *username, Password: password}); err != nil {
		return err
	}
	if err := cf.Save(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "release: credentials for %s stored in %s\n", reg.Name(), cf.Filename)
	return nil
}
