// The docs' sandbox-per-session deployment: a host poller runs a spawn script per claimed item,
// the script reads the item's secret from the work item JSON on stdin and starts the sandbox side
// with the secret in ANTHROPIC_WORK_SECRET (the environment key stays on the host). The host
// poller is `mnemo worker poll --on-work` (the `ant` CLI cannot be had, see compat/README.md);
// the sandbox side is the Go SDK's HandleItem (./sandbox) or `mnemo worker run`.
package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spawnScript is the docs' --on-work script, with sed for jq.
const spawnScript = `#!/bin/sh
set -eu
secret=$(sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
[ -n "$secret" ] || { echo "spawn.sh: no secret in the work item" >&2; exit 1; }
exec env -u ANTHROPIC_ENVIRONMENT_KEY ANTHROPIC_WORK_SECRET="$secret" "$@"
`

func buildSandbox(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sandbox")
	cmd := exec.Command("go", "build", "-o", out, "./sandbox")
	if text, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./sandbox: %v\n%s", err, text)
	}
	return out
}

func TestWorkerSpawnScriptStartsTheSandboxSide(t *testing.T) {
	mnemo, err := mnemoBinary()
	if err != nil {
		t.Fatal(err)
	}
	sandbox := buildSandbox(t)
	for _, c := range []struct {
		name       string
		sandbox    func(workdir string) []string
		writeCount int
		logMark    string // a line only this sandbox logs
	}{
		{"go-sdk-handle-item", func(wd string) []string { return []string{sandbox, "-workdir", wd, "-max-idle", "2s"} }, len(idea), "session tool runner starting"},
		{"mnemo-worker-run", func(wd string) []string { return []string{mnemo, "worker", "run", "--workdir", wd, "--max-idle", "2s"} }, len([]rune(idea)), "memory ready"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkerEnv(t)
			area := t.TempDir()
			spawn := filepath.Join(area, "spawn.sh")
			// The sandbox command follows the script's name, as `--on-work` takes one SCRIPT: a
			// wrapper bakes it in.
			wrapper := filepath.Join(area, "on-work.sh")
			if err := os.WriteFile(spawn, []byte(spawnScript), 0o755); err != nil {
				t.Fatal(err)
			}
			quoted := make([]string, 0, 4)
			for _, a := range c.sandbox(w.workdir) {
				quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
			}
			if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+spawn+" "+strings.Join(quoted, " ")+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			logPath := filepath.Join(area, "poller.log")
			logFile, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logFile.Close()
			poller := exec.Command(mnemo, "worker", "poll", "--environment-id", w.su.env, "--base-url", w.server.BaseURL,
				"--workdir", w.workdir, "--on-work", wrapper)
			// mnemo's worker (the poller and `mnemo worker run` in the sandbox, which inherits
			// the poller's environment) mounts only under its own mount root: the server's, here.
			poller.Env = append(os.Environ(), "ANTHROPIC_ENVIRONMENT_KEY="+w.su.key, "MNEMO_MEMORY_MOUNT_ROOT="+w.mountRoot)
			poller.Stdout, poller.Stderr = logFile, logFile
			poller.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := poller.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- poller.Wait() }()
			t.Cleanup(func() { _ = syscall.Kill(-poller.Process.Pid, syscall.SIGKILL) })
			defer func() {
				if t.Failed() {
					log, _ := os.ReadFile(logPath)
					t.Logf("--- the poller's and the sandbox's log ---\n%s", log)
				}
			}()

			script := w.startScript(w.twoStoreSteps())
			script.wait(t)
			_ = syscall.Kill(-poller.Process.Pid, syscall.SIGTERM)
			select {
			case err := <-done:
				ok(t, err, "`mnemo worker poll --on-work` after SIGTERM")
			case <-time.After(60 * time.Second):
				t.Fatal("`mnemo worker poll --on-work` did not exit after SIGTERM")
			}
			items := w.workItems(script.session)
			eq(t, len(items), 1, "the session's work items")
			w.checkTwoStoreRun(script, items[0], c.writeCount)
			log, _ := os.ReadFile(logPath)
			if !strings.Contains(string(log), c.logMark) {
				t.Fatalf("the sandbox side did not serve the item (no %q in the log)", c.logMark)
			}
			if strings.Contains(string(log), w.su.key) {
				t.Fatal("the environment key appears in the log")
			}
		})
	}
}
