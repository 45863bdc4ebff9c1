// Command benchworker is the Go SDK's worker as bench/worker/run.py runs it beside `mnemo worker`
// and the Python SDK's: EnvironmentWorker.Run until SIGTERM, configured from MNEMO_BENCH_WORKER
// (JSON: base_url, environment_id, workdir, max_idle seconds, memory_sync_interval seconds) and
// ANTHROPIC_ENVIRONMENT_KEY, both removed from the environment before the worker starts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

type config struct {
	BaseURL            string  `json:"base_url"`
	EnvironmentID      string  `json:"environment_id"`
	Workdir            string  `json:"workdir"`
	MaxIdle            float64 `json:"max_idle"`
	MemorySyncInterval float64 `json:"memory_sync_interval"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func main() {
	var cfg config
	if err := json.Unmarshal([]byte(os.Getenv("MNEMO_BENCH_WORKER")), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "benchworker: MNEMO_BENCH_WORKER must hold the JSON configuration: %v\n", err)
		os.Exit(2)
	}
	key := os.Getenv("ANTHROPIC_ENVIRONMENT_KEY")
	os.Unsetenv("MNEMO_BENCH_WORKER")
	os.Unsetenv("ANTHROPIC_ENVIRONMENT_KEY")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	maxIdle := seconds(cfg.MaxIdle)
	client := anthropic.NewClient(option.WithBaseURL(cfg.BaseURL), option.WithRequestTimeout(60*time.Second))
	worker := environments.NewEnvironmentWorker(client, environments.EnvironmentWorkerOptions{
		EnvironmentID:      cfg.EnvironmentID,
		EnvironmentKey:     key,
		Workdir:            cfg.Workdir,
		MaxIdle:            &maxIdle,
		MemorySyncInterval: seconds(cfg.MemorySyncInterval),
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err := worker.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "benchworker: %v\n", err)
		os.Exit(1)
	}
}
