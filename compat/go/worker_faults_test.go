// The Go SDK's EnvironmentWorker's documented faults against mnemo serve, and a context
// cancelled mid-session; the agent's side posted by hand (plain HTTP with the API key).
package compat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// newSession creates a session with the read-write and the read-only store attached.
func (w *workerEnv) newSession() string {
	t := w.t
	session, err := w.client.Beta.Sessions.New(w.ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(w.su.agent)},
		EnvironmentID: w.su.env,
		Resources: []anthropic.BetaSessionNewParamsResourceUnion{
			{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{MemoryStoreID: w.rw.ID, Access: anthropic.BetaManagedAgentsMemoryStoreResourceParamAccessReadWrite}},
			{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{MemoryStoreID: w.ro.ID, Access: anthropic.BetaManagedAgentsMemoryStoreResourceParamAccessReadOnly}},
		},
	})
	ok(t, err, "create a session with two stores")
	var mounts []string
	for _, r := range session.Resources {
		if r.Type == "memory_store" {
			mounts = append(mounts, r.MountPath)
		}
	}
	eqSlice(t, mounts, []string{w.rwMount(), w.roMount()}, "mount_path = --memory-mount-root + slug of the name")
	return session.ID
}

// toolUse posts one agent.tool_use (the agent's side, with the API key); returns its id.
func (w *workerEnv) toolUse(sessionID, name string, input map[string]any) string {
	t := w.t
	res := apiRequest(t, w.server.BaseURL, w.server.APIKey, "POST", "/v1/sessions/"+sessionID+"/events",
		map[string]any{"events": []map[string]any{{"type": "agent.tool_use", "name": name, "input": input}}})
	eq(t, res.Status, 200, "post agent.tool_use: "+res.Text)
	data, _ := res.Body["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("post agent.tool_use: %s", res.Text)
	}
	id, _ := data[0].(map[string]any)["id"].(string)
	prefixed(t, id, "sevt_", "tool_use id")
	return id
}

// events lists a session's events as raw JSON objects.
func (w *workerEnv) events(sessionID string) []map[string]any {
	p := w.client.Beta.Sessions.Events.ListAutoPaging(w.ctx, sessionID, anthropic.BetaSessionEventListParams{Limit: param.NewOpt[int64](100)})
	var out []map[string]any
	for _, e := range collect(w.t, p.Next, p.Current, p.Err) {
		var m map[string]any
		_ = json.Unmarshal([]byte(e.RawJSON()), &m)
		out = append(out, m)
	}
	return out
}

// waitResult waits for the one user.tool_result of a call; returns its is_error and text.
func (w *workerEnv) waitResult(sessionID, toolUseID string) (bool, string) {
	t := w.t
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range w.events(sessionID) {
			if e["type"] == "user.tool_result" && e["tool_use_id"] == toolUseID {
				var texts []string
				content, _ := e["content"].([]any)
				for _, c := range content {
					if m, _ := c.(map[string]any); m["type"] == "text" {
						texts = append(texts, m["text"].(string))
					}
				}
				isError, _ := e["is_error"].(bool)
				return isError, strings.Join(texts, "")
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no result for %s", toolUseID)
	return false, ""
}

// checkWaitingForResult: the session is idle with stop_reason requires_action naming the call,
// which has no result.
func (w *workerEnv) checkWaitingForResult(sessionID, toolUseID string) {
	t := w.t
	session, err := w.client.Beta.Sessions.Get(w.ctx, sessionID, anthropic.BetaSessionGetParams{})
	ok(t, err, "retrieve the session")
	eq(t, string(session.Status), "idle", "the session's status")
	var lastIdle map[string]any
	for _, e := range w.events(sessionID) {
		if e["type"] == "user.tool_result" && e["tool_use_id"] == toolUseID {
			t.Fatalf("the call %s got a result: %v", toolUseID, e)
		}
		if e["type"] == "session.status_idle" {
			lastIdle = e
		}
	}
	if lastIdle == nil {
		t.Fatal("no session.status_idle in the history")
	}
	reason, _ := lastIdle["stop_reason"].(map[string]any)
	eq(t, reason["type"], any("requires_action"), "the last idle's stop_reason")
	ids, _ := reason["event_ids"].([]any)
	if len(ids) != 1 || ids[0] != toolUseID {
		t.Fatalf("requires_action names %v, want [%s]", ids, toolUseID)
	}
}

// runFault serves a session whose first call waits, with the worker set up by prepare, and
// returns HandleItem's error after checking what every documented fault leaves behind.
func runFault(t *testing.T, prepare func(w *workerEnv, item *anthropic.BetaSelfHostedWork) environments.HandleItemOptions) (*workerEnv, error) {
	w := newWorkerEnv(t)
	d := newDiagnostics(t)
	sessionID := w.newSession()
	call := w.toolUse(sessionID, "read", map[string]any{"file_path": w.rwMount() + "/notes/readme.md"})
	item := w.claim()
	eq(t, item.Data.ID, sessionID, "the item's session")
	opts := prepare(w, item)
	opts.WorkID, opts.EnvironmentID, opts.SessionID = item.ID, w.su.env, sessionID
	ctx, cancel := context.WithTimeout(w.ctx, 60*time.Second)
	defer cancel()
	err := w.newWorker(d, environments.EnvironmentWorkerOptions{}).HandleItem(ctx, opts)
	if err == nil {
		t.Fatal("HandleItem succeeded; the fault should have failed the item")
	}
	t.Logf("HandleItem: %v", err)
	w.checkItemStopped(item.ID)
	w.checkWaitingForResult(sessionID, call)
	eq(t, len(w.sessionVersions(w.rw.ID, sessionID)), 0, "no version by the session")
	return w, err
}

func TestWorkerFaultNoSessionsToken(t *testing.T) {
	w, err := runFault(t, func(w *workerEnv, item *anthropic.BetaSelfHostedWork) environments.HandleItemOptions {
		// No secret at all: the environment key authorizes the item, but memory needs a token.
		t.Setenv("ANTHROPIC_WORK_SECRET", "")
		return environments.HandleItemOptions{EnvironmentKey: w.su.key}
	})
	if !errors.Is(err, environments.ErrSessionMemoryNoToken) {
		t.Fatalf("HandleItem: %v, want ErrSessionMemoryNoToken", err)
	}
	w.checkMountsRemoved()
}

func TestWorkerFaultLeftoverFolder(t *testing.T) {
	var leftover string
	w, err := runFault(t, func(w *workerEnv, item *anthropic.BetaSelfHostedWork) environments.HandleItemOptions {
		leftover = filepath.Join(w.rwMount(), "stale.md")
		if err := os.MkdirAll(w.rwMount(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(leftover, []byte("a dead run's file\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("ANTHROPIC_WORK_SECRET", item.Secret)
		return environments.HandleItemOptions{}
	})
	var memErr *environments.SessionMemoryError
	if !errors.As(err, &memErr) || memErr.MemoryStoreID != w.rw.ID || !strings.Contains(err.Error(), "something already exists") {
		t.Fatalf("HandleItem: %v, want a SessionMemoryError for %s saying something already exists", err, w.rw.ID)
	}
	data, readErr := os.ReadFile(leftover)
	if readErr != nil || string(data) != "a dead run's file\n" {
		t.Fatalf("the leftover folder is left exactly as found: %q, %v", data, readErr)
	}
	if _, found := w.memoriesOf(w.rw.ID)["/stale.md"]; found {
		t.Fatal("the leftover file was uploaded")
	}
}

func TestWorkerFaultUnwritableMountRoot(t *testing.T) {
	w, err := runFault(t, func(w *workerEnv, item *anthropic.BetaSelfHostedWork) environments.HandleItemOptions {
		// Permission bits do not bind root; the immutable attribute does (ext4, xfs, btrfs).
		if os.Geteuid() == 0 {
			if out, err := exec.Command("chattr", "+i", w.mountRoot).CombinedOutput(); err != nil {
				t.Skipf("as root, only `chattr +i` makes the mount root unwritable, and it failed here: %v %s", err, out)
			}
			t.Cleanup(func() { _ = exec.Command("chattr", "-i", w.mountRoot).Run() })
		} else {
			if err := os.Chmod(w.mountRoot, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(w.mountRoot, 0o755) })
		}
		t.Setenv("ANTHROPIC_WORK_SECRET", item.Secret)
		return environments.HandleItemOptions{}
	})
	var memErr *environments.SessionMemoryError
	if !errors.As(err, &memErr) || memErr.MemoryStoreID != w.rw.ID || !strings.Contains(err.Error(), "cannot create the memory store's folder") {
		t.Fatalf("HandleItem: %v, want a SessionMemoryError for %s saying it cannot create the folder", err, w.rw.ID)
	}
	w.checkMountsRemoved()
}

func TestWorkerCancelledMidSessionStillUploadsChangedFiles(t *testing.T) {
	w := newWorkerEnv(t)
	d := newDiagnostics(t)
	sessionID := w.newSession()
	item := w.claim()
	t.Setenv("ANTHROPIC_WORK_SECRET", item.Secret)
	// No periodic sync during the test: only the cancel's flush can upload.
	worker := w.newWorker(d, environments.EnvironmentWorkerOptions{MemorySyncInterval: time.Hour})
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- worker.HandleItem(ctx, environments.HandleItemOptions{WorkID: item.ID, EnvironmentID: w.su.env, SessionID: sessionID})
	}()
	path := w.rwMount() + "/late/written.md"
	call := w.toolUse(sessionID, "write", map[string]any{"file_path": path, "content": idea})
	isError, _ := w.waitResult(sessionID, call)
	eq(t, isError, false, "the write's result is_error")
	editCall := w.toolUse(sessionID, "edit", map[string]any{"file_path": w.rwMount() + "/todo.md", "old_string": "call bob", "new_string": "call alice"})
	isError, _ = w.waitResult(sessionID, editCall)
	eq(t, isError, false, "the edit's result is_error")
	if _, found := w.memoriesOf(w.rw.ID)["/late/written.md"]; found {
		t.Fatal("the write was uploaded before the cancel; the test cannot tell the cancel's flush from a sync")
	}
	cancel() // what the worker's SIGTERM handler does
	select {
	case err := <-done:
		ok(t, err, "HandleItem after a cancel")
	case <-time.After(60 * time.Second):
		t.Fatal("HandleItem did not return after its context was cancelled")
	}
	mems := w.memoriesOf(w.rw.ID)
	eq(t, mems["/late/written.md"], idea, "the written file, uploaded on the way out")
	eq(t, mems["/todo.md"], todoEdited, "the edited file, uploaded on the way out")
	eqSlice(t, w.sessionVersions(w.rw.ID, sessionID), []string{"created /late/written.md", "modified /todo.md"}, "the session's versions")
	w.checkMountsRemoved()
}
