package cli

import (
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
)

// productionRisksOf are the production risks each process warns of at
// start, and `config check --production --for PROCESS` reports.
var productionRisksOf = map[string][]string{
	"central": {"temporal.encryption_keys"},
	"site":    {"site.api_tokens", "temporal.encryption_keys"},
}

// warnProductionRisks logs, at a process's start, each of the settings at
// paths that cfg leaves empty although production must not
// (config.ProductionRisk), with what that risks.
func warnProductionRisks(log *zap.Logger, cfg config.Config, paths ...string) {
	for _, path := range paths {
		if risk := config.ProductionRisk(cfg, path); risk != "" {
			log.Warn("production risk: "+path+" is empty", zap.String("risk", risk))
		}
	}
}
