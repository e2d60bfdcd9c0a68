// Package temporalclient connects Outpost processes to Temporal from config.
package temporalclient

import (
	"crypto/tls"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/logging"
)

// Options builds client options: the address and namespace, TLS, and an API
// key from its environment variable when set.
func Options(cfg config.Temporal, logger *zap.Logger) client.Options {
	opts := client.Options{
		HostPort:  cfg.Address,
		Namespace: cfg.Namespace,
		Logger:    logging.NewTemporal(logger),
	}
	if key := cfg.APIKey(); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		opts.ConnectionOptions.TLS = &tls.Config{}
	} else if cfg.TLS {
		opts.ConnectionOptions.TLS = &tls.Config{}
	}
	return opts
}

// Dial connects now and fails if Temporal is unreachable (central worker,
// operator commands). metrics, when not nil, receives the SDK's metrics.
func Dial(cfg config.Temporal, logger *zap.Logger, metrics client.MetricsHandler) (client.Client, error) {
	opts := Options(cfg, logger)
	opts.MetricsHandler = metrics
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s (namespace %s): %w", cfg.Address, cfg.Namespace, err)
	}
	return c, nil
}

// Lazy returns a client that connects on first use, so a site starts and
// accepts work while central is unreachable.
func Lazy(cfg config.Temporal, logger *zap.Logger) (client.Client, error) {
	c, err := client.NewLazyClient(Options(cfg, logger))
	if err != nil {
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Address, err)
	}
	return c, nil
}
