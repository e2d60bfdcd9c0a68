package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/devserver"
)

// devTemporalPorts are the ports of the dev server `outpost dev` starts:
// derived from temporal.address (devserver.DerivedPorts), the Web UI at
// dev.temporal_ui_port when set.
func devTemporalPorts(cfg config.Config) (devserver.Ports, error) {
	ports, err := devserver.DerivedPorts(cfg.Temporal.Address)
	if err != nil {
		return ports, fmt.Errorf("%w (temporal.address)", err)
	}
	if cfg.Dev.TemporalUIPort != 0 {
		ports.UI = cfg.Dev.TemporalUIPort
	}
	return ports, nil
}

// temporalPortsLine names every port the running dev server listens on:
// the ones Outpost gives it and, read from the system where it can be, the
// two its history and matching services were given by the CLI.
func temporalPortsLine(cfg config.Config) string {
	ports, err := devTemporalPorts(cfg)
	if err != nil {
		return err.Error()
	}
	line := fmt.Sprintf("%d gRPC, %d HTTP API, %d metrics, %d Web UI", ports.Frontend, ports.HTTP, ports.Metrics, ports.UI)
	listening, err := devserver.ListeningPorts(ports.Frontend)
	if err != nil {
		return line + "; and two the CLI picks for its history and matching services"
	}
	var picked []string
	for _, p := range listening {
		if !slices.Contains([]int{ports.Frontend, ports.HTTP, ports.Metrics, ports.UI}, p) {
			picked = append(picked, strconv.Itoa(p))
		}
	}
	return line + "; " + strings.Join(picked, ", ") + " picked by the CLI (history, matching services)"
}
