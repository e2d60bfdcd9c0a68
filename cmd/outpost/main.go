// Command outpost runs Outpost's processes and operator tools; see
// `outpost help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/outpost-dev/outpost/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin})
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "outpost:", err)
	if errors.Is(err, cli.ErrUsage) {
		os.Exit(2)
	}
	os.Exit(1)
}
