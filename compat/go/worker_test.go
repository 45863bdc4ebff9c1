// The Go SDK's EnvironmentWorker (lib/environments) serving sessions with memory stores against
// `mnemo serve --memory-mount-root`, the agent's side driven by `mnemo session script`.
package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

const (
	readme     = "# Read me\nhello from the memory store\n"
	todo       = "- buy milk\n- call bob\n- water the plants\n"
	guide      = "The guide is read-only.\n"
	idea       = "a fresh idea \u2713 written by the session\n"
	workerIdle = 2 * time.Second // the worker's MaxIdle: it leaves this long after the turn ends
)

var todoEdited = strings.Replace(todo, "call bob", "call alice", 1)

// slug is the folder name mnemo derives from a store's name under --memory-mount-root.
func slug(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune(' ')
		}
	}
	return strings.Join(strings.Fields(strings.ToLower(b.String())), "-")
}

// diagnostics collects a worker's log records and HTTP exchanges; printed when a test fails.
type diagnostics struct {
	mu        sync.Mutex
	log       bytes.Buffer
	exchanges []string
	start     time.Time
}

func newDiagnostics(t *testing.T) *diagnostics {
	d := &diagnostics{start: time.Now()}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("MNEMO_COMPAT_WORKER_TRACE") != "" {
			t.Logf("--- the worker's log ---\n%s", d.logText())
			d.mu.Lock()
			ex := d.exchanges
			if len(ex) > 150 {
				ex = ex[len(ex)-150:]
			}
			t.Logf("--- the worker's HTTP exchanges ---\n%s", strings.Join(ex, "\n"))
			d.mu.Unlock()
		}
	})
	return d
}

func (d *diagnostics) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.Write(p)
}

func (d *diagnostics) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

func (d *diagnostics) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(d, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (d *diagnostics) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	stamp := fmt.Sprintf("%7.2fs", time.Since(d.start).Seconds())
	res, err := next(req)
	line := fmt.Sprintf("%s %s %s betas=%q", stamp, req.Method, req.URL.RequestURI(), req.Header.Values("anthropic-beta"))
	if err != nil {
		line += " error: " + err.Error()
	} else {
		line += fmt.Sprintf(" -> %d", res.StatusCode)
	}
	d.mu.Lock()
	d.exchanges = append(d.exchanges, line)
	d.mu.Unlock()
	return res, err
}

// errorRecords are the worker's log records at level ERROR (or WARN, with warn).
func (d *diagnostics) records(level string) []string {
	var out []string
	for _, line := range strings.Split(d.logText(), "\n") {
		if strings.Contains(line, "level="+level) {
			out = append(out, line)
		}
	}
	return out
}

// workerEnv is a server with --memory-mount-root, its operator's objects and two seeded stores.
type workerEnv struct {
	*fixture
	su        setup
	mountRoot string
	workdir   string
	rw, ro    *anthropic.BetaManagedAgentsMemoryStore
	todoID    string
}

func newWorkerEnv(t *testing.T) *workerEnv {
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
	tag := randomHex(4)
	w := &workerEnv{fixture: f, mountRoot: mountRoot, workdir: workdir}
	var err error
	w.rw, err = f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Go Notes " + tag, Description: param.NewOpt("notes the session may change")})
	ok(t, err, "create the read-write store")
	w.ro, err = f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Go Reference " + tag})
	ok(t, err, "create the read-only store")
	f.newMemory(w.rw.ID, "/notes/readme.md", readme)
	w.todoID = f.newMemory(w.rw.ID, "/todo.md", todo).ID
	f.newMemory(w.ro.ID, "/guide.md", guide)
	w.su = f.workerSetup()
	return w
}

func (w *workerEnv) rwMount() string { return filepath.Join(w.mountRoot, slug(w.rw.Name)) }
func (w *workerEnv) roMount() string { return filepath.Join(w.mountRoot, slug(w.ro.Name)) }

type step struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
}

type stepResult struct {
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error"`
	Text    string `json:"text"`
}

type scriptRun struct {
	done    chan struct{}
	err     error
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	results []stepResult
	session string
}

// startScript runs `mnemo session script` with both stores attached (read-write, read-only).
func (w *workerEnv) startScript(steps []step) *scriptRun {
	t := w.t
	file := filepath.Join(t.TempDir(), "script.json")
	body, _ := json.Marshal(map[string]any{
		"agent":          w.su.agent,
		"environment_id": w.su.env,
		"resources": []map[string]any{
			{"type": "memory_store", "memory_store_id": w.rw.ID, "access": "read_write"},
			{"type": "memory_store", "memory_store_id": w.ro.ID, "access": "read_only"},
		},
		"steps": steps,
	})
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	bin, err := mnemoBinary()
	if err != nil {
		t.Fatal(err)
	}
	run := &scriptRun{done: make(chan struct{})}
	cmd := exec.Command(bin, "session", "script", file, "--base-url", w.server.BaseURL, "--timeout", "120")
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY="+w.server.APIKey)
	cmd.Stdout, cmd.Stderr = &run.stdout, &run.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-run.done
	})
	go func() {
		defer close(run.done)
		run.err = cmd.Wait()
	}()
	return run
}

// wait waits for the script to end and parses its results.
func (r *scriptRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(150 * time.Second):
		t.Fatal("mnemo session script did not end")
	}
	if r.err != nil {
		t.Fatalf("mnemo session script: %v\nstderr:\n%s\nstdout:\n%s", r.err, r.stderr.String(), r.stdout.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout.String()), "\n") {
		var res stepResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("a result line of mnemo session script is not JSON: %q", line)
		}
		r.results = append(r.results, res)
	}
	for _, f := range strings.Fields(r.stderr.String()) {
		if strings.HasPrefix(f, "sesn_") {
			r.session = strings.TrimRight(f, ".,:;")
			break
		}
	}
	if r.session == "" {
		t.Fatalf("mnemo session script named no session on stderr: %s", r.stderr.String())
	}
}

// claim polls the environment's queue with its key, as `ant beta:worker poll` does, and acks the
// item; returns it with its secret.
func (w *workerEnv) claim() *anthropic.BetaSelfHostedWork {
	t := w.t
	envClient := newClient(w.server.BaseURL, w.su.key)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		item, err := envClient.Beta.Environments.Work.Poll(w.ctx, w.su.env, anthropic.BetaEnvironmentWorkPollParams{BlockMs: param.NewOpt[int64](999)})
		ok(t, err, "poll")
		if item == nil || item.ID == "" {
			continue
		}
		_, err = envClient.Beta.Environments.Work.Ack(w.ctx, item.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: w.su.env})
		ok(t, err, "ack")
		return item
	}
	t.Fatal("no work item was queued for the script's session")
	return nil
}

// newWorker is the SDK's worker with a client that carries no credential of its own: each item
// is authorized by the sessions token in its secret.
func (w *workerEnv) newWorker(d *diagnostics, opts environments.EnvironmentWorkerOptions) *environments.EnvironmentWorker {
	client := anthropic.NewClient(option.WithBaseURL(w.server.BaseURL), option.WithRequestTimeout(requestTimeout))
	idle := workerIdle
	if opts.MaxIdle == nil {
		opts.MaxIdle = &idle
	}
	if opts.Workdir == "" {
		opts.Workdir = w.workdir
	}
	opts.Logger = d.logger()
	opts.RequestOptions = append(opts.RequestOptions, option.WithMiddleware(d.middleware))
	return environments.NewEnvironmentWorker(client, opts)
}

func (w *workerEnv) memoriesOf(storeID string) map[string]string {
	out := map[string]string{}
	for _, m := range w.allMemories(storeID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull}) {
		out[m.Path] = m.Content
	}
	return out
}

// sessionVersions are the (operation, path) of the versions the session wrote in a store, in
// byte order (the Go SDK uploads a store's files concurrently, so their order is not fixed);
// each must name the session as its actor.
func (w *workerEnv) sessionVersions(storeID, sessionID string) []string {
	t := w.t
	vs := w.allVersions(storeID, anthropic.BetaMemoryStoreMemoryVersionListParams{SessionID: param.NewOpt(sessionID)})
	var out []string
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		eqSlice(t, []string{v.CreatedBy.Type, v.CreatedBy.SessionID}, []string{"session_actor", sessionID}, "created_by of "+v.ID)
		out = append(out, string(v.Operation)+" "+v.Path)
	}
	sort.Strings(out)
	return out
}

func (w *workerEnv) checkItemStopped(itemID string) {
	t := w.t
	got, err := w.client.Beta.Environments.Work.Get(w.ctx, itemID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: w.su.env})
	ok(t, err, "retrieve the work item")
	eq(t, string(got.State), "stopped", "the work item's state")
	for what, v := range map[string]string{"acknowledged_at": got.AcknowledgedAt, "stopped_at": got.StoppedAt, "latest_heartbeat_at": got.LatestHeartbeatAt} {
		if v == "" {
			t.Fatalf("the work item's %s is not set: %s", what, got.RawJSON())
		}
	}
}

// workItems are the ids of a session's work items.
func (w *workerEnv) workItems(sessionID string) []string {
	p := w.client.Beta.Environments.Work.ListAutoPaging(w.ctx, w.su.env, anthropic.BetaEnvironmentWorkListParams{Limit: param.NewOpt[int64](100)})
	var out []string
	for _, it := range collect(w.t, p.Next, p.Current, p.Err) {
		if it.Data.ID == sessionID {
			out = append(out, it.ID)
		}
	}
	return out
}

func (w *workerEnv) checkMountsRemoved() {
	t := w.t
	for _, m := range []string{w.rwMount(), w.roMount()} {
		if _, err := os.Stat(m); !os.IsNotExist(err) {
			t.Fatalf("the worker should have removed %s (stat: %v)", m, err)
		}
	}
	if st, err := os.Stat(w.mountRoot); err != nil || !st.IsDir() {
		t.Fatalf("the mount root itself stays: %v", err)
	}
}

// twoStoreSteps are the calls of the two-store session: reads in both stores, a write and an edit
// in the read-write one, a write and an edit refused in the read-only one, bash, glob, grep.
func (w *workerEnv) twoStoreSteps() []step {
	rw, ro := w.rwMount(), w.roMount()
	return []step{
		{"read", map[string]any{"file_path": rw + "/notes/readme.md"}},
		{"read", map[string]any{"file_path": ro + "/guide.md"}},
		{"write", map[string]any{"file_path": rw + "/ideas/new.md", "content": idea}},
		{"edit", map[string]any{"file_path": rw + "/todo.md", "old_string": "call bob", "new_string": "call alice"}},
		{"write", map[string]any{"file_path": ro + "/denied.md", "content": "must not land"}},
		{"edit", map[string]any{"file_path": ro + "/guide.md", "old_string": "read-only", "new_string": "writable"}},
		{"bash", map[string]any{"command": "ls -R " + rw + " " + ro}},
		{"glob", map[string]any{"pattern": "**/*.md", "path": rw}},
		{"grep", map[string]any{"pattern": "alice", "path": rw}},
	}
}

// checkTwoStoreRun checks what a worker left after serving twoStoreSteps: the results, the item,
// the folders, both stores and the session's versions. writeCount is what the worker counts in
// `wrote N bytes` (the Go SDK: UTF-8 bytes; mnemo: code points).
func (w *workerEnv) checkTwoStoreRun(script *scriptRun, itemID string, writeCount int) {
	t := w.t
	t.Helper()
	rw, ro := w.rwMount(), w.roMount()
	r := script.results
	if os.Getenv("MNEMO_COMPAT_WORKER_TRACE") != "" {
		for _, res := range r {
			t.Logf("step %d %s is_error=%v %q", res.Step, res.Tool, res.IsError, res.Text)
		}
	}
	eq(t, len(r), len(w.twoStoreSteps()), "one result per step")
	expect := func(i int, isError bool, text string) {
		t.Helper()
		if r[i].IsError != isError || r[i].Text != text {
			t.Fatalf("step %d (%s): got is_error=%v %q, want is_error=%v %q", i, r[i].Tool, r[i].IsError, r[i].Text, isError, text)
		}
	}
	expectSome := func(i int, isError bool, contains ...string) {
		t.Helper()
		for _, c := range contains {
			if r[i].IsError != isError || !strings.Contains(r[i].Text, c) {
				t.Fatalf("step %d (%s): got is_error=%v %q, want is_error=%v and %q in it", i, r[i].Tool, r[i].IsError, r[i].Text, isError, c)
			}
		}
	}
	expect(0, false, readme)
	expect(1, false, guide)
	expect(2, false, fmt.Sprintf("wrote %d bytes to %s", writeCount, rw+"/ideas/new.md"))
	expect(3, false, fmt.Sprintf("edited %s (1 replacement(s))", rw+"/todo.md"))
	expectSome(4, true, ro+"/denied.md", "read-only")
	expectSome(5, true, ro+"/guide.md", "read-only")
	expectSome(6, false, "readme.md", "todo.md", "new.md", "guide.md")
	if strings.Contains(r[6].Text, "denied.md") {
		t.Fatalf("the refused write created denied.md: %q", r[6].Text)
	}
	expectSome(7, false, "ideas/new.md", "notes/readme.md", "todo.md")
	expectSome(8, false, "call alice")

	w.checkItemStopped(itemID)
	w.checkMountsRemoved()
	eq(t, fmt.Sprint(w.memoriesOf(w.rw.ID)), fmt.Sprint(map[string]string{"/ideas/new.md": idea, "/notes/readme.md": readme, "/todo.md": todoEdited}), "the read-write store")
	eq(t, fmt.Sprint(w.memoriesOf(w.ro.ID)), fmt.Sprint(map[string]string{"/guide.md": guide}), "the read-only store is unchanged")
	eqSlice(t, w.sessionVersions(w.rw.ID, script.session), []string{"created /ideas/new.md", "modified /todo.md"}, "the session's versions in the read-write store")
	eq(t, len(w.sessionVersions(w.ro.ID, script.session)), 0, "no version by the session in the read-only store")
	eq(t, w.get(w.rw.ID, w.todoID).Content, todoEdited, "the edit updated the existing memory")
	session, err := w.client.Beta.Sessions.Get(w.ctx, script.session, anthropic.BetaSessionGetParams{})
	ok(t, err, "retrieve the session")
	eq(t, string(session.Status), "idle", "the session after the worker left")
}

func TestWorkerHandleItemServesAScriptedSessionWithTwoStores(t *testing.T) {
	w := newWorkerEnv(t)
	d := newDiagnostics(t)
	script := w.startScript(w.twoStoreSteps())
	item := w.claim()
	if item.Secret == "" || item.Data.ID == "" {
		t.Fatalf("the polled item carries its session and its secret: %s", item.RawJSON())
	}
	// As inside an `ant beta:worker poll --on-work` child: everything comes from the environment.
	t.Setenv("ANTHROPIC_WORK_SECRET", item.Secret)
	t.Setenv("ANTHROPIC_WORK_ID", item.ID)
	t.Setenv("ANTHROPIC_ENVIRONMENT_ID", w.su.env)
	t.Setenv("ANTHROPIC_SESSION_ID", item.Data.ID)
	worker := w.newWorker(d, environments.EnvironmentWorkerOptions{})
	ctx, cancel := context.WithTimeout(w.ctx, 120*time.Second)
	defer cancel()
	ok(t, worker.HandleItem(ctx, environments.HandleItemOptions{}), "HandleItem")
	script.wait(t)
	eq(t, script.session, item.Data.ID, "the script's session is the item's")
	w.checkTwoStoreRun(script, item.ID, len(idea))
	if errs := d.records("ERROR"); len(errs) > 0 {
		t.Fatalf("the worker logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
