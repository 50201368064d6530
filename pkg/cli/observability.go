package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/materializeinc/orchestratord/pkg/logging"
	"github.com/materializeinc/orchestratord/pkg/tracing"
)

// Observability are the log and trace flags of both programs: this
// operator's --log-format and --log-level, and upstream orchestratord's
// tracing flags under their names (--startup-log-filter, --log-prefix,
// --opentelemetry-endpoint, ...), so an upstream configuration carries over.
type Observability struct {
	Logging logging.Options
	Tracing tracing.Options
}

// AddFlags registers the flags.
func (o *Observability) AddFlags(fs *pflag.FlagSet) {
	o.Logging.AddFlags(fs)
	o.Tracing.AddFlags(fs)
}

// flushTimeout bounds the export of the spans left at exit.
const flushTimeout = 5 * time.Second

// Start builds the logger, writing to w, and starts tracing when an
// endpoint is set; stop exports the spans left and syncs the log.
// component names the program in the spans' resource.
func (o *Observability) Start(w io.Writer, component string) (log *zap.Logger, stop func(), err error) {
	log, err = o.Logging.New(w)
	if err != nil {
		return nil, nil, err
	}
	stopTracing, err := o.Tracing.Start(log, component)
	if err != nil {
		return nil, nil, err
	}
	return log, func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		if err := stopTracing(ctx); err != nil {
			log.Warn("exporting the last spans failed", zap.Error(err))
		}
		_ = log.Sync()
	}, nil
}
