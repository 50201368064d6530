package app

import (
	"context"
	"net/http"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/materializeinc/orchestratord/pkg/client/clientset/versioned"
	"github.com/materializeinc/orchestratord/pkg/controllers/unreadable"
	"github.com/materializeinc/orchestratord/pkg/environmentd"
	"github.com/materializeinc/orchestratord/pkg/kubeclient"
	"github.com/materializeinc/orchestratord/pkg/leaderelection"
	"github.com/materializeinc/orchestratord/pkg/leaderelection/fence"
)

// leaseClients are the API clients one controller writes with, over
// connections of its own. The fence of its Lease (a renewal overdue past
// the renew deadline) refuses and aborts only these: the process's other
// controllers keep their terms, their connections and their Events.
// Informers and elections use the process's shared clients, which write
// nothing on behalf of a term.
type leaseClients struct {
	kube     kubeclient.Interface
	mz       versioned.Interface
	dynamic  dynamic.Interface
	recorder record.EventRecorder
	// stopEvents stops the Event broadcaster, dropping what is queued.
	stopEvents func()
	conns      *fence.Connections
}

// newLeaseClients builds the clients of controller from base (which has
// the lead-context fence, fence.Transport). Its user agent
// names the controller, so the audit log attributes each write to a
// Lease. Its writes, Events included, are refused at the moment they
// would be sent unless the process holds the Lease within its renew
// deadline.
func newLeaseClients(ctx context.Context, base *rest.Config, controller, identity string, terms *leaderelection.Terms, log *zap.Logger) (*leaseClients, error) {
	lease := leaderelection.LeaseName(controller)
	cfg := rest.CopyConfig(base)
	cfg.UserAgent = base.UserAgent + " controller/" + controller
	conns := fence.NewConnections()
	cfg.Dial = conns.Dial
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return fence.Gate(rt, func() bool { return terms.WritesAllowed(lease) })
	})
	c := &leaseClients{conns: conns}
	var err error
	if c.kube, err = kubeclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// The informers read each custom resource on its own; a reconciler's
	// own reads (and what its writes return) are refused an object whose
	// quantity would hold the worker (unreadable.GuardTransport).
	mzCfg := rest.CopyConfig(cfg)
	mzCfg.Wrap(unreadable.GuardTransport)
	if c.mz, err = versioned.NewForConfig(mzCfg); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// Events have a client (and rate limiter) of their own, so a burst of
	// them never delays the controller's writes.
	events, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The broadcaster outlives the signal, so reconciles still in flight
	// when it arrives can record their Events (not refused as "broadcaster
	// already stopped"); stopEvents stops it once every controller has
	// returned. The correlator's caches (spam filter, aggregation, repeat
	// counts) hold 4096 recent Events each by default, about 7 MB once
	// 1 000 Materializes have rolled out; 512 still fold the repeats of
	// every object that is failing at once in all but the largest fleets.
	// Events are written by fence.RecordToSink, so that an Event client-go
	// combines from similar ones is dropped with its term too.
	eventsCtx, stopRetries := context.WithCancel(context.WithoutCancel(ctx))
	broadcaster := record.NewBroadcaster(record.WithContext(eventsCtx))
	sink := &typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")}
	fence.RecordToSink(eventsCtx, broadcaster, fence.Events(sink, terms, lease, log), record.CorrelatorOptions{LRUCacheSize: 512}, log)
	c.stopEvents = func() { broadcaster.Shutdown(); stopRetries() }
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "orchestratord", Host: identity})
	return c, nil
}

// environmentd is the client of environmentd's leader API for this
// controller's terms. The fence refuses a promotion sent past the renew
// deadline (fence.Transport), and the connections are the controller's,
// so the fence also aborts a promotion still on the wire, as it aborts the
// API server's writes; on a shared keep-alive pool it would go on.
func (c *leaseClients) environmentd() *environmentd.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = c.conns.Dial
	return &environmentd.Client{HTTP: &http.Client{Timeout: environmentd.DefaultTimeout, Transport: t}, Wrap: fence.Transport}
}

// abort resets the controller's connections when its term is fenced: a
// write sent just before the deadline never lands after it.
func (c *leaseClients) abort(log *zap.Logger, controller string) {
	log.Warn("fenced: the controller's API connections aborted, unsent writes discarded",
		zap.String("controller", controller), zap.Int("connections", c.conns.Abort()))
}
