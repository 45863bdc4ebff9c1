// Command sandbox is the sandbox side of the docs' sandbox-per-session deployment, written
// against the Go SDK: it serves the one work item its environment describes
// (ANTHROPIC_WORK_ID, ANTHROPIC_SESSION_ID, ANTHROPIC_ENVIRONMENT_ID, ANTHROPIC_BASE_URL and the
// item's secret in ANTHROPIC_WORK_SECRET) with EnvironmentWorker.HandleItem, and ends when the
// session does. SIGTERM or SIGINT cancel it (the worker then flushes what changed). The suite's
// spawn script (worker_spawn_test.go) starts it from `mnemo worker poll --on-work`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
)

func main() {
	workdir := flag.String("workdir", ".", "working directory of the session's tools")
	maxIdle := flag.Duration("max-idle", 60*time.Second, "stop serving this long after the session's turn ended")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The client takes its base URL from ANTHROPIC_BASE_URL; each request of the item is
	// authorized by the sessions token in the work secret.
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(), environments.EnvironmentWorkerOptions{
		Workdir: *workdir,
		MaxIdle: maxIdle,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err := worker.HandleItem(ctx, environments.HandleItemOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
}
