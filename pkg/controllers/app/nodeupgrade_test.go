package app

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The GKE node upgrade trigger's flags are upstream's, and checked as
// upstream checks them.
func TestGCPNodeUpgradeFlags(t *testing.T) {
	const (
		sub      = "--gcp-node-upgrade-notification-subscription=projects/p/subscriptions/s"
		name     = "--gcp-cluster-name=c"
		location = "--gcp-cluster-location=us-central1"
	)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		// Off, the other flags are not checked.
		{args: []string{"--gcp-node-upgrade-notification-subscription=bad"}},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", sub, name, location}},
		{args: []string{"--cloud-provider=GCP", "--enable-gcp-node-upgrade-rollout-trigger", sub, name, location,
			"--gcp-node-upgrade-watched-node-pool=materialize", "--gcp-node-upgrade-watched-node-pool=system"}},
		{args: []string{"--enable-gcp-node-upgrade-rollout-trigger", sub, name, location}, wantErr: "requires --cloud-provider=gcp"},
		{args: []string{"--cloud-provider=aws", "--aws-account-id=1", "--enable-gcp-node-upgrade-rollout-trigger", sub, name, location},
			wantErr: "requires --cloud-provider=gcp"},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", name, location},
			wantErr: "--gcp-node-upgrade-notification-subscription is required"},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", sub, location}, wantErr: "--gcp-cluster-name is required"},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", sub, name}, wantErr: "--gcp-cluster-location is required"},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", "--gcp-node-upgrade-notification-subscription=my-sub", name, location},
			wantErr: "expected projects/{project}/subscriptions/{subscription}"},
		{args: []string{"--cloud-provider=gcp", "--enable-gcp-node-upgrade-rollout-trigger", sub, name, location, "--controllers=balancer,console"},
			wantErr: "requires the materialize controller"},
		// Any cloud provider.
		{args: []string{"--node-removal-rollout-trigger"}},
		{args: []string{"--node-removal-rollout-trigger", "--controllers=balancer"}, wantErr: "requires the materialize controller"},
	} {
		o := &Options{Controllers: knownControllers, EnvironmentdClusterRole: "role", LeaderElectionNamespace: "ops", LeaderElectionIdentity: "pod"}
		fs := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
		o.Observability.AddFlags(fs)
		o.Environment.AddFlags(fs)
		o.addNodeUpgradeFlags(fs)
		fs.StringSliceVar(&o.Controllers, "controllers", knownControllers, "")
		// Required flags first; a case's own come later and win.
		if err := fs.Parse(append([]string{"--cloud-provider=local", "--region=kind"}, tc.args...)); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		err := o.complete()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.wantErr)
		}
	}
	// Repeated, not split on commas (clap's Vec<String>).
	var o Options
	fs := pflag.NewFlagSet("controllers", pflag.ContinueOnError)
	o.addNodeUpgradeFlags(fs)
	if err := fs.Parse([]string{"--gcp-node-upgrade-watched-node-pool=a,b", "--gcp-node-upgrade-watched-node-pool=c"}); err != nil {
		t.Fatal(err)
	}
	if got := o.GCPNodeUpgrade.WatchedNodePools; !reflect.DeepEqual(got, []string{"a,b", "c"}) {
		t.Errorf("watched pools %q", got)
	}
}

// together stops what runs alongside when the controller returns, and
// returns only once both have.
func TestTogether(t *testing.T) {
	var alongsideDone atomic.Bool
	lead := together(func(ctx context.Context) { time.Sleep(10 * time.Millisecond) }, func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		alongsideDone.Store(true)
	})
	lead(context.Background())
	if !alongsideDone.Load() {
		t.Error("together returned before what ran alongside")
	}
}
