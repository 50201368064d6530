package upstream

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	controllers "github.com/materializeinc/orchestratord/pkg/controllers/app"
	webhook "github.com/materializeinc/orchestratord/pkg/webhook/app"
)

// orchestratordFlags are upstream orchestratord's long flags at the commit
// the stand-ins' tables come from (2d0a559c): src/orchestratord/src/bin/
// orchestratord.rs's Args and the flattened TracingCliArgs of
// src/orchestrator-tracing.
var orchestratordFlags = strings.Fields(`
additional-crd-columns aws-account-id aws-secrets-controller-tags balancerd-affinity balancerd-default-resources
balancerd-http-port balancerd-internal-http-port balancerd-node-selector balancerd-sql-port balancerd-toleration
bootstrap-builtin-analytics-cluster-replica-size bootstrap-builtin-analytics-cluster-replication-factor
bootstrap-builtin-catalog-server-cluster-replica-size bootstrap-builtin-probe-cluster-replica-size
bootstrap-builtin-probe-cluster-replication-factor bootstrap-builtin-support-cluster-replica-size
bootstrap-builtin-support-cluster-replication-factor bootstrap-builtin-system-cluster-replica-size
bootstrap-builtin-system-cluster-replication-factor bootstrap-default-cluster-replica-size cloud-provider
clusterd-affinity clusterd-node-selector clusterd-toleration collect-pod-metrics console-affinity
console-default-resources console-http-port console-image-tag-default console-image-tag-map console-node-selector
console-toleration create-balancers create-console default-certificate-specs disable-authentication
disable-license-key-checks disable-statement-logging enable-gcp-node-upgrade-rollout-trigger
enable-internal-statement-logging enable-prometheus-scrape-annotations enable-security-context environmentd-affinity
environmentd-allowed-origins environmentd-availability-zones environmentd-cluster-replica-sizes
environmentd-connection-role-arn environmentd-default-resources environmentd-http-port environmentd-iam-role-arn
environmentd-internal-http-port environmentd-internal-persist-pubsub-port environmentd-internal-sql-port
environmentd-node-selector environmentd-sql-port environmentd-toleration ephemeral-volume-class gcp-cluster-location
gcp-cluster-name gcp-node-upgrade-notification-subscription gcp-node-upgrade-watched-node-pool helm-chart-version
image-pull-policy install-v1-crd internal-console-proxy-url kubernetes-context leader-election-identity
metrics-listen-address network-policies-egress-cidrs network-policies-egress-enabled network-policies-ingress-cidrs
network-policies-ingress-enabled network-policies-internal-enabled orchestratord-pod-selector-labels
profiling-listen-address region scheduler-name secrets-controller segment-api-key segment-client-side tls-ca tls-cert
tls-key webhook-cert-reload-interval webhook-listen-address webhook-service-name webhook-service-namespace
webhook-service-port
log-format log-prefix opentelemetry-endpoint opentelemetry-header opentelemetry-max-batch-queue-size
opentelemetry-max-concurrent-exports opentelemetry-max-export-batch-size opentelemetry-max-export-timeout
opentelemetry-resource opentelemetry-sched-delay sentry-dsn sentry-environment sentry-tag startup-log-filter
startup-opentelemetry-filter tokio-console-listen-addr tokio-console-publish-interval tokio-console-retention`)

// webhookFlags are those of upstream's flags that concern its conversion
// webhook, which here is its own program.
var webhookFlags = strings.Fields(`kubernetes-context metrics-listen-address profiling-listen-address
webhook-listen-address webhook-service-name webhook-service-namespace webhook-service-port webhook-cert-reload-interval
install-v1-crd tls-ca tls-cert tls-key log-format log-prefix opentelemetry-endpoint startup-log-filter sentry-dsn
tokio-console-listen-addr`)

// A command line written for upstream orchestratord never meets "unknown
// flag": each of its flags is the controllers' (by its name or an alias),
// or refused with what to use instead; the webhook's likewise for those of
// the webhook.
func TestEveryUpstreamFlagIsKnown(t *testing.T) {
	for _, c := range []struct {
		cmd   *cobra.Command
		flags []string
	}{{controllers.NewCommand(), orchestratordFlags}, {webhook.NewCommand(), webhookFlags}} {
		for _, name := range c.flags {
			if c.cmd.Flags().Lookup(name) == nil {
				t.Errorf("%s: upstream's --%s is unknown", c.cmd.Name(), name)
			}
		}
	}
}

// Aliases set this program's flag; refused flags fail naming the
// replacement, with or without a value; ignored ones are accepted.
func TestUpstreamFlagsMeanTheSameOrSaySo(t *testing.T) {
	cmd := controllers.NewCommand()
	fs := cmd.Flags()
	if err := fs.Parse([]string{"--metrics-listen-address=:3100", "--create-console=false", "--disable-authentication"}); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("metrics-address").Value.String(); got != ":3100" {
		t.Errorf("--metrics-listen-address set --metrics-address to %q", got)
	}
	if got := fs.Lookup("create-consoles").Value.String(); got != "false" {
		t.Errorf("--create-console=false set --create-consoles to %q", got)
	}
	for _, args := range [][]string{{"--profiling-listen-address=:8004"}, {"--profiling-listen-address"}, {"--tls-cert", "/etc/tls/tls.crt"}} {
		err := controllers.NewCommand().Flags().Parse(args)
		if err == nil || !strings.Contains(err.Error(), "no counterpart here:") {
			t.Errorf("%v: %v, want a refusal naming the replacement", args, err)
		}
	}
	wh := webhook.NewCommand().Flags()
	if err := wh.Parse([]string{"--webhook-listen-address=:8001", "--tls-cert=/etc/tls/tls.crt", "--webhook-service-namespace=mz"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"listen-address": ":8001", "tls-cert-file": "/etc/tls/tls.crt", "namespace": "mz"} {
		if got := wh.Lookup(name).Value.String(); got != want {
			t.Errorf("webhook --%s = %q, want %q", name, got, want)
		}
	}
}
