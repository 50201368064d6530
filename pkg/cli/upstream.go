package cli

import (
	"errors"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// UpstreamFlags are upstream orchestratord's flags as one of this
// project's programs takes them, so a command line written for upstream
// (the chart's extraArgs, a Deployment's args) either means the same here
// or fails at once, saying what to use instead.
type UpstreamFlags struct {
	// Aliases: upstream's name -> this program's flag of the same meaning.
	Aliases map[string]string
	// Refused: upstream's name -> what to use instead.
	Refused map[string]string
	// Ignored: upstream's boolean flags that upstream itself reads nowhere
	// -> why; accepted with a deprecation warning.
	Ignored map[string]string
}

// Install adds u to fs: aliases by pflag's name normalization (the help
// shows this program's names only), the refused and ignored flags hidden.
func (u UpstreamFlags) Install(fs *pflag.FlagSet) {
	aliases := u.Aliases
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if canonical, ok := aliases[name]; ok {
			return pflag.NormalizedName(canonical)
		}
		return pflag.NormalizedName(name)
	})
	for name, instead := range u.Refused {
		fs.Var(refused{instead}, name, "upstream orchestratord's flag, refused: "+instead)
		f := fs.Lookup(name)
		f.NoOptDefVal = "true" // refused with or without a value
		f.Hidden = true
		f.Annotations = map[string][]string{commandLineOnly: {"true"}}
	}
	for name, why := range u.Ignored {
		fs.Bool(name, false, "upstream orchestratord's flag, ignored: "+why)
		_ = fs.MarkDeprecated(name, why)
		fs.Lookup(name).Annotations = map[string][]string{commandLineOnly: {"true"}}
	}
}

// commandLineOnly marks the flags ApplyEnv leaves alone: upstream's
// refused and ignored flags are for command lines written for upstream,
// and their environment names collide with the variables Kubernetes gives
// every pod for a Service (a Service orchestratord-webhook makes
// ORCHESTRATORD_WEBHOOK_SERVICE_PORT).
const commandLineOnly = "orchestratord.materialize.cloud/command-line-only"

// NoTokioConsole is what replaces upstream's tokio-console flags.
const NoTokioConsole = "a Rust runtime's console; this program is Go: --profiling serves /debug/pprof/"

// refused is a flag whose every value is an error naming the replacement.
type refused struct{ instead string }

func (r refused) String() string { return "" }
func (r refused) Type() string   { return "upstream" }
func (r refused) Set(string) error {
	return errors.New("upstream orchestratord's flag has no counterpart here: " + r.instead)
}

// RESTConfig is the programs' API server configuration: kubeconfig when
// given, else in-cluster. context, upstream orchestratord's
// --kubernetes-context, selects a kubeconfig context as upstream does: from
// kubeconfig or the default locations ($KUBECONFIG, ~/.kube/config), and
// in-cluster when no kubeconfig has it.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	if context == "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err == nil {
		return cfg, nil
	}
	inCluster, inClusterErr := rest.InClusterConfig()
	if inClusterErr != nil {
		return nil, errors.Join(err, inClusterErr)
	}
	return inCluster, nil
}
