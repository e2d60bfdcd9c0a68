package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/outpost-dev/outpost/internal/config"
)

// devConfigFile, under dev.data_dir, is the config `outpost dev` runs with,
// every default and setting resolved. The other commands read it when run
// beside the stack without --config, so the stack's addresses, stores and
// payload key mean the same to all of them.
const devConfigFile = "outpost.yaml"

// writeDevConfig writes cfg, the config the dev stack runs with, to
// <dev.data_dir>/outpost.yaml and returns its path. Owner-only: it names
// key files. Secrets stay in environment variables, so none is written.
func writeDevConfig(cfg config.Config) (string, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("dev stack: write its config: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("dev stack: write its config: %w", err)
	}
	header := fmt.Sprintf("# The config `outpost dev` runs with: the dev defaults, its --config file and its\n"+
		"# own settings, written at every start (edits here are lost: change the file given to\n"+
		"# `outpost dev --config` instead). Every outpost command run in %s\n"+
		"# without --config reads it; relative paths are relative to that folder.\n\n", wd)
	path := filepath.Join(cfg.Dev.DataDir, devConfigFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append([]byte(header), data...), 0o600); err != nil {
		return "", fmt.Errorf("dev stack: write its config %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("dev stack: write its config %s: %w", path, err)
	}
	return path, nil
}

// devConfigDoc says, in a --config flag's help, what its absence means.
const devConfigDoc = "the dev stack's .outpost-dev/outpost.yaml when run beside it, else the defaults"

// devConfigBeside is the config of a dev stack run from the working
// directory (.outpost-dev/outpost.yaml), or "" when there is none.
func devConfigBeside() string {
	path := filepath.Join(config.DevDefault().Dev.DataDir, devConfigFile)
	if !exists(path) {
		return ""
	}
	return path
}

// loadConfig reads the config a command other than `outpost dev` runs
// with: the file given with --config over the production defaults;
// without one, the dev stack's config when run beside it; else the
// production defaults. from names the file read ("" for the defaults).
func loadConfig(given string) (cfg config.Config, from string, err error) {
	from = given
	if from == "" {
		from = devConfigBeside()
	}
	if from == "" {
		return config.Default(), "", nil
	}
	cfg, err = config.Load(from, config.Default())
	return cfg, from, err
}

// sayDevConfig logs, when a command without --config took the dev stack's
// config, which file it read, so nobody wonders why it reached the stack.
func sayDevConfig(log *zap.Logger, given, from string) {
	if given == "" && from != "" {
		log.Info("no --config: using the config of the dev stack beside this folder", zap.String("file", from))
	}
}
