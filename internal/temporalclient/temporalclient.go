// Package temporalclient connects Outpost processes to Temporal from config.
package temporalclient

import (
	"crypto/tls"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/codec"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/logging"
)

// Options builds client options: the address and namespace, TLS, an API
// key from its environment variable when set, and the payload encryption
// of temporal.encryption_keys (every worker on the client uses it too).
func Options(cfg config.Temporal, logger *zap.Logger) (client.Options, error) {
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
	if len(cfg.EncryptionKeys) > 0 {
		c, err := PayloadCodec(cfg.EncryptionKeys)
		if err != nil {
			return client.Options{}, err
		}
		opts.DataConverter = codec.DataConverter(c)
	}
	return opts, nil
}

// PayloadCodec reads the configured keys into the codec every client uses,
// and central's codec server serves.
func PayloadCodec(keys []config.EncryptionKey) (*codec.AESGCM, error) {
	parsed := make([]codec.Key, 0, len(keys))
	for _, k := range keys {
		text, err := k.Secret()
		if err != nil {
			return nil, fmt.Errorf("temporal.encryption_keys: %w", err)
		}
		secret, err := codec.ParseSecret(text)
		if err != nil {
			return nil, fmt.Errorf("temporal.encryption_keys: key %q: %w", k.ID, err)
		}
		parsed = append(parsed, codec.Key{ID: k.ID, Secret: secret})
	}
	c, err := codec.New(parsed)
	if err != nil {
		return nil, fmt.Errorf("temporal.encryption_keys: %w", err)
	}
	return c, nil
}

// Dial connects now and fails if Temporal is unreachable (central worker,
// operator commands). metrics, when not nil, receives the SDK's metrics.
func Dial(cfg config.Temporal, logger *zap.Logger, metrics client.MetricsHandler) (client.Client, error) {
	opts, err := Options(cfg, logger)
	if err != nil {
		return nil, err
	}
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
	opts, err := Options(cfg, logger)
	if err != nil {
		return nil, err
	}
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Address, err)
	}
	return c, nil
}
