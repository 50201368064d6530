package servingcert

import (
	"crypto/tls"

	"github.com/prometheus/client_golang/prometheus"
)

var expiryDesc = prometheus.NewDesc("orchestratord_webhook_serving_certificate_expiry_timestamp_seconds",
	"When the certificate the webhook serves now expires (its notAfter, Unix seconds); absent until one is loaded.", nil, nil)

// ExpiryCollector reports, at each scrape, the expiry of the certificate
// get would serve: in every TLS mode, whatever rotates it, so an alert
// catches a rotation that stopped (a cert-manager issuer failing, a
// Secret nobody renews).
func ExpiryCollector(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) prometheus.Collector {
	return expiryCollector{get: get}
}

type expiryCollector struct {
	get func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	cert, err := c.get(nil)
	if err != nil || cert == nil || cert.Leaf == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(cert.Leaf.NotAfter.Unix()))
}
