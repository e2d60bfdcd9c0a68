package fromconfig

// The temporal section becomes a Temporal client of every process.

import (
	"compress/gzip"
	"crypto/tls"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	grpcgzip "google.golang.org/grpc/encoding/gzip"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/payloadcipher"
	"github.com/outpost-dev/outpost/internal/tracing"
)

// The SDK sends every request through gRPC's gzip compressor, which at
// gzip's default level starts each message by clearing 640 KB of match
// tables: for a notification's requests of half a kilobyte that was most
// of the 49 µs a message took, and gzip a tenth of the CPU of the
// process delivering them (outpost bench --only e2e). The
// fastest level has no tables to clear: 21 µs, and the message within a
// few bytes of the same size, so a WAN link keeps what compression gives
// it. gRPC allows the change only before any connection is made.
func init() {
	if err := grpcgzip.SetLevel(gzip.BestSpeed); err != nil {
		panic(err) // a valid level: cannot fail
	}
}

// TemporalOptions builds client options: the address and namespace, TLS, an API
// key from its environment variable when set, and the payload encryption
// of temporal.encryption_keys (every worker on the client uses it too).
func TemporalOptions(cfg config.Temporal, logger *zap.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  cfg.Address,
		Namespace: cfg.Namespace,
		Logger:    logging.NewTemporal(logger),
	}
	if key := cfg.APIKey(); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	if cfg.UsesTLS() {
		t, err := tlsConfig(cfg)
		if err != nil {
			return client.Options{}, err
		}
		opts.ConnectionOptions.TLS = t
	}
	if len(cfg.EncryptionKeys) > 0 {
		c, err := PayloadCodec(cfg.EncryptionKeys)
		if err != nil {
			return client.Options{}, err
		}
		opts.DataConverter = payloadcipher.DataConverter(c)
	}
	return opts, nil
}

// tlsConfig is the TLS of the frontend connection: the CA and server name
// to verify it by, and the client certificate for mutual TLS, read at every
// handshake so that a renewed certificate is picked up without a restart.
func tlsConfig(cfg config.Temporal) (*tls.Config, error) {
	t := &tls.Config{ServerName: cfg.TLSServerName, MinVersion: tls.VersionTLS12}
	if cfg.TLSCAFile != "" {
		pool, err := config.LoadCertPool(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls_ca_file: %w", err)
		}
		t.RootCAs = pool
	}
	if cfg.TLSCertFile != "" {
		load := func() (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("temporal.tls_cert_file %s with tls_key_file %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
			}
			return &pair, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		t.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	}
	return t, nil
}

// describeTLS says how the connection was secured, for an error: a refused
// handshake often reads only "broken pipe" or "EOF".
func describeTLS(cfg config.Temporal) string {
	switch {
	case !cfg.UsesTLS():
		return ", plain text: set temporal.tls if the frontend expects TLS"
	case cfg.TLSCertFile == "":
		return ", TLS without a client certificate"
	default:
		return ", TLS with client certificate " + cfg.TLSCertFile
	}
}

// PayloadCodec reads the configured keys into the codec every client uses,
// and central's codec server serves.
func PayloadCodec(keys []config.EncryptionKey) (*payloadcipher.AESGCM, error) {
	parsed := make([]payloadcipher.Key, 0, len(keys))
	for _, k := range keys {
		text, err := k.Secret()
		if err != nil {
			return nil, fmt.Errorf("temporal.encryption_keys: %w", err)
		}
		secret, err := payloadcipher.ParseSecret(text)
		if err != nil {
			return nil, fmt.Errorf("temporal.encryption_keys: key %q: %w", k.ID, err)
		}
		parsed = append(parsed, payloadcipher.Key{ID: k.ID, Secret: secret})
	}
	c, err := payloadcipher.New(parsed)
	if err != nil {
		return nil, fmt.Errorf("temporal.encryption_keys: %w", err)
	}
	return c, nil
}

// DialTemporal connects now and fails if Temporal is unreachable (central worker,
// operator commands). metrics, when not nil, receives the SDK's metrics;
// traces, when not nil, traces the workflows it starts and the workers
// created on it.
func DialTemporal(cfg config.Temporal, logger *zap.Logger, metrics client.MetricsHandler, traces *tracing.Provider) (client.Client, error) {
	opts, err := TemporalOptions(cfg, logger)
	if err != nil {
		return nil, err
	}
	opts.MetricsHandler = metrics
	if opts.Interceptors, err = traces.TemporalInterceptors(); err != nil {
		return nil, err
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s (namespace %s%s): %w", cfg.Address, cfg.Namespace, describeTLS(cfg), err)
	}
	return c, nil
}

// LazyTemporal returns a client that connects on first use, so a site starts and
// accepts work while central is unreachable. traces, when not nil, traces
// the workflows it starts and the workers created on it.
func LazyTemporal(cfg config.Temporal, logger *zap.Logger, traces *tracing.Provider) (client.Client, error) {
	opts, err := TemporalOptions(cfg, logger)
	if err != nil {
		return nil, err
	}
	if opts.Interceptors, err = traces.TemporalInterceptors(); err != nil {
		return nil, err
	}
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Address, err)
	}
	return c, nil
}
