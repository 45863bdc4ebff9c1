// Differential: the same 20-call scripted session (two stores, one read-only), driven by
// `mnemo session script`, served once by the Go SDK's EnvironmentWorker.Run and once by `mnemo
// worker poll`, each on a fresh server with the same state; tool results, final memories and the
// session's versions compared.
package compat

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

var diffRWSeed = map[string]string{
	"/notes/readme.md":        "# Read me\nhello from the notes store\nhello again\n",
	"/todo.md":                "- buy milk\n- call bob\n- water the plants\n",
	"/journal/2024-01.md":     "January: started the journal\n",
	"/journal/2024-02.md":     "February: nothing happened\n",
	"/scratch/old.md":         "an old scratch note, soon removed\n",
	"/projects/alpha/plan.md": "alpha plan: ship it\nstatus: bob is on it\n",
}

var diffROSeed = map[string]string{
	"/guide.md":             "The guide is read-only.\nDo not edit the guide.\n",
	"/policies/security.md": "Rotate keys often.\nNever share secrets.\n",
}

var diffRWFinal = map[string]string{
	"/ideas/new.md":           idea,
	"/journal/2024-01.md":     "January: started the journal\n",
	"/journal/2024-02.md":     "February: nothing happened\nappended by bash\n",
	"/journal/2024-03.md":     "created by bash\n",
	"/notes/readme.md":        "# Read me\nhi from the notes store\nhi again\n",
	"/projects/alpha/plan.md": "alpha plan: ship it\nstatus: bob is on it\n",
	"/todo.md":                "- buy milk\n- call alice\n- water the plants\n",
}

var diffRWVersions = []string{
	"created /ideas/new.md",
	"created /journal/2024-03.md",
	"deleted /scratch/old.md",
	"modified /journal/2024-02.md",
	"modified /notes/readme.md",
	"modified /todo.md",
}

type diffCall struct {
	label   string
	tool    string
	input   func(rw, ro string) map[string]any
	compare string // exact, lines (sorted lines), count (`wrote N bytes`), enoent (is_error, names the file, says "no such file or directory"), none
}

var diffScript = []diffCall{
	{"read rw readme", "read", func(rw, ro string) map[string]any { return map[string]any{"file_path": rw + "/notes/readme.md"} }, "exact"},
	{"read ro guide", "read", func(rw, ro string) map[string]any { return map[string]any{"file_path": ro + "/guide.md"} }, "exact"},
	{"write new rw file", "write", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": rw + "/ideas/new.md", "content": idea}
	}, "count"},
	{"edit rw todo", "edit", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": rw + "/todo.md", "old_string": "call bob", "new_string": "call alice"}
	}, "exact"},
	{"bash append to rw journal", "bash", func(rw, ro string) map[string]any {
		return map[string]any{"command": "printf 'appended by bash\\n' >> " + rw + "/journal/2024-02.md"}
	}, "exact"},
	{"bash create rw journal file", "bash", func(rw, ro string) map[string]any {
		return map[string]any{"command": "printf 'created by bash\\n' > " + rw + "/journal/2024-03.md && cat " + rw + "/journal/2024-03.md"}
	}, "exact"},
	{"bash rm rw memory", "bash", func(rw, ro string) map[string]any {
		return map[string]any{"command": "rm " + rw + "/scratch/old.md && ls " + rw + "/scratch | wc -l"}
	}, "exact"},
	{"glob rw journal", "glob", func(rw, ro string) map[string]any { return map[string]any{"pattern": "journal/*.md", "path": rw} }, "lines"},
	{"glob rw **/*.md", "glob", func(rw, ro string) map[string]any { return map[string]any{"pattern": "**/*.md", "path": rw} }, "lines"},
	{"grep rw (several files)", "grep", func(rw, ro string) map[string]any { return map[string]any{"pattern": "bash|alice|bob", "path": rw} }, "lines"},
	{"grep ro one file", "grep", func(rw, ro string) map[string]any {
		return map[string]any{"pattern": "read-?only", "path": ro + "/guide.md"}
	}, "exact"},
	{"write into ro (refused)", "write", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": ro + "/denied.md", "content": "must not land"}
	}, "exact"},
	{"edit in ro (refused)", "edit", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": ro + "/guide.md", "old_string": "read-only", "new_string": "writable"}
	}, "exact"},
	{"bash write into ro (not compared)", "bash", func(rw, ro string) map[string]any {
		return map[string]any{"command": "echo vandalised > " + ro + "/guide.md; echo sneaky > " + ro + "/bash-denied.md"}
	}, "none"},
	{"read ro policies", "read", func(rw, ro string) map[string]any { return map[string]any{"file_path": ro + "/policies/security.md"} }, "exact"},
	// The Go SDK words it `read PATH: …`, mnemo (like the Python SDK) `read: PATH: …`.
	{"read removed rw file (error)", "read", func(rw, ro string) map[string]any { return map[string]any{"file_path": rw + "/scratch/old.md"} }, "enoent"},
	{"edit rw, old_string missing (error)", "edit", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": rw + "/notes/readme.md", "old_string": "not there", "new_string": "x"}
	}, "exact"},
	{"edit rw, ambiguous (error)", "edit", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": rw + "/notes/readme.md", "old_string": "hello", "new_string": "hi"}
	}, "exact"},
	{"edit rw replace_all", "edit", func(rw, ro string) map[string]any {
		return map[string]any{"file_path": rw + "/notes/readme.md", "old_string": "hello", "new_string": "hi", "replace_all": true}
	}, "exact"},
	{"read rw readme after edit", "read", func(rw, ro string) map[string]any { return map[string]any{"file_path": rw + "/notes/readme.md"} }, "exact"},
}

type diffRun struct {
	kind      string
	results   []stepResult // texts with the mount root as <MNT> and the workdir as <WORK>
	rw, ro    map[string]string
	rwVersion []string
	roVersion []string
}

// serveDiff runs the script on a fresh server, served by the worker of this kind.
func serveDiff(t *testing.T, kind string) diffRun {
	area := t.TempDir()
	mountRoot := filepath.Join(area, "mnt", "memory")
	workdir := filepath.Join(area, "workdir")
	for _, d := range []string{mountRoot, workdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server := startServerT(t, "--memory-mount-root", mountRoot)
	f := &fixture{t: t, ctx: ctxT(t), server: server, client: server.Client()}
	w := &workerEnv{fixture: f, mountRoot: mountRoot, workdir: workdir}
	var err error
	w.rw, err = f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Diff Notes"})
	ok(t, err, "create the read-write store")
	w.ro, err = f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Diff Reference"})
	ok(t, err, "create the read-only store")
	for _, seed := range []struct {
		id    string
		files map[string]string
	}{{w.rw.ID, diffRWSeed}, {w.ro.ID, diffROSeed}} {
		keys := make([]string, 0, len(seed.files))
		for p := range seed.files {
			keys = append(keys, p)
		}
		sort.Strings(keys)
		for _, p := range keys {
			f.newMemory(seed.id, p, seed.files[p])
		}
	}
	w.su = f.workerSetup()
	rw, ro := w.rwMount(), w.roMount()
	steps := make([]step, len(diffScript))
	for i, c := range diffScript {
		steps[i] = step{Tool: c.tool, Input: c.input(rw, ro)}
	}

	var stopWorker func()
	switch kind {
	case "go":
		d := newDiagnostics(t)
		worker := w.newWorker(d, environments.EnvironmentWorkerOptions{EnvironmentID: w.su.env, EnvironmentKey: w.su.key})
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error, 1)
		go func() { done <- worker.Run(ctx) }()
		stopWorker = func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && err != context.Canceled {
					t.Fatalf("go: Run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("go: Run did not return after its context was cancelled")
			}
			if errs := d.records("ERROR"); len(errs) > 0 {
				t.Fatalf("go: the worker logged errors:\n%s", strings.Join(errs, "\n"))
			}
		}
	case "mnemo":
		bin, err := mnemoBinary()
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(area, "worker.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer logFile.Close()
		cmd := exec.Command(bin, "worker", "poll", "--environment-id", w.su.env, "--base-url", server.BaseURL,
			"--workdir", workdir, "--state-dir", filepath.Join(area, "state"), "--max-idle", "2s", "--no-live")
		// mnemo's worker mounts only under its own mount root: the server's, here.
		cmd.Env = append(os.Environ(), "ANTHROPIC_ENVIRONMENT_KEY="+w.su.key, "MNEMO_MEMORY_MOUNT_ROOT="+mountRoot)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		stopWorker = func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					log, _ := os.ReadFile(logPath)
					t.Fatalf("mnemo: `mnemo worker poll` after SIGTERM: %v\n%s", err, log)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("mnemo: `mnemo worker poll` did not exit after SIGTERM")
			}
		}
	}

	script := w.startScript(steps)
	script.wait(t)
	stopWorker()

	items := w.client.Beta.Environments.Work.ListAutoPaging(f.ctx, w.su.env, anthropic.BetaEnvironmentWorkListParams{Limit: param.NewOpt[int64](100)})
	var states []string
	for _, it := range collect(t, items.Next, items.Current, items.Err) {
		if it.Data.ID == script.session {
			states = append(states, string(it.State))
		}
	}
	eqSlice(t, states, []string{"stopped"}, kind+": the session's work items")
	w.checkMountsRemoved()
	eq(t, len(script.results), len(diffScript), kind+": one result per step")
	run := diffRun{kind: kind}
	for _, r := range script.results {
		r.Text = strings.ReplaceAll(strings.ReplaceAll(r.Text, mountRoot, "<MNT>"), workdir, "<WORK>")
		run.results = append(run.results, r)
	}
	run.rw, run.ro = w.memoriesOf(w.rw.ID), w.memoriesOf(w.ro.ID)
	run.rwVersion, run.roVersion = w.sessionVersions(w.rw.ID, script.session), w.sessionVersions(w.ro.ID, script.session)
	return run
}

// view is what a step's result is compared by.
func (c diffCall) view(r stepResult) string {
	switch c.compare {
	case "none":
		return "(not compared)"
	case "lines":
		lines := strings.Split(strings.TrimSpace(r.Text), "\n")
		sort.Strings(lines)
		return fmt.Sprintf("is_error=%v %q", r.IsError, strings.Join(lines, "\n"))
	case "enoent":
		return fmt.Sprintf("is_error=%v names the file and ENOENT: %v", r.IsError,
			strings.Contains(r.Text, "<MNT>/diff-notes/scratch/old.md") && strings.Contains(r.Text, "no such file or directory"))
	case "count":
		text := r.Text
		if rest, found := strings.CutPrefix(text, "wrote "); found {
			if _, after, cut := strings.Cut(rest, " bytes"); cut {
				text = "wrote <N> bytes" + after
			}
		}
		return fmt.Sprintf("is_error=%v %q", r.IsError, text)
	}
	return fmt.Sprintf("is_error=%v %q", r.IsError, r.Text)
}

func TestWorkerDiffGoSDKWorkerAgainstMnemoWorker(t *testing.T) {
	goRun := serveDiff(t, "go")
	mnemoRun := serveDiff(t, "mnemo")

	// Each on its own against the fixed expectations.
	for _, run := range []diffRun{goRun, mnemoRun} {
		eq(t, fmt.Sprint(run.rw), fmt.Sprint(diffRWFinal), run.kind+": the read-write store")
		eq(t, fmt.Sprint(run.ro), fmt.Sprint(diffROSeed), run.kind+": the read-only store is unchanged")
		eqSlice(t, run.rwVersion, diffRWVersions, run.kind+": the session's versions in the read-write store")
		eq(t, len(run.roVersion), 0, run.kind+": no version by the session in the read-only store")
	}
	eq(t, goRun.results[2].Text, fmt.Sprintf("wrote %d bytes to <MNT>/diff-notes/ideas/new.md", len(idea)), "go: `wrote N bytes` counts UTF-8 bytes")

	var diffs []string
	for i, c := range diffScript {
		g, m := c.view(goRun.results[i]), c.view(mnemoRun.results[i])
		if g != m {
			diffs = append(diffs, fmt.Sprintf("step %d %s:\n    go:    %s\n    mnemo: %s", i, c.label, g, m))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("the tool results differ:\n%s", strings.Join(diffs, "\n"))
	}
}
