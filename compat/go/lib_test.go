// Shared helpers of the Go SDK compatibility suite: the `mnemo serve` lifecycle, the backend
// (SQLite or a fresh PostgreSQL schema per server), SDK clients, and assertions.
//
// The suite is an ordinary `go test` package; `compat/go/run.sh` runs it with the module cache
// and build cache under target/. Only the base URL, the API key and a request timeout differ
// from the SDK's defaults; every call goes through the SDK's public API except what it has no
// method for (mnemo's `POST /v1/environments/{id}/keys`, and the agent's side of a session),
// which is plain HTTP as in the Python and TypeScript suites.
package compat

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// The SDK version go.mod pins; TestMain refuses to run on another.
const sdkModule = "github.com/anthropics/anthropic-sdk-go/v2"
const sdkVersion = "v2.18.0"

const (
	anthropicVersion = "2026-10-21"
	memoryBeta       = "agent-memory-2026-07-22"
	agentsBeta       = "managed-agents-2026-04-01"
	unknownStore     = "memstore_0000000000000000000000"
	unknownMemory    = "mem_0000000000000000000000"
	requestTimeout   = 60 * time.Second
	startTimeout     = 30 * time.Second
)

// backend is where every server of this run stores its data: "sqlite" (a fresh file per
// server) or "postgres" (a fresh schema per server of the database MNEMO_TEST_POSTGRES names).
var backend = func() string {
	b := strings.ToLower(strings.TrimSpace(os.Getenv("MNEMO_COMPAT_DATABASE")))
	if b == "" {
		return "sqlite"
	}
	return b
}()

var (
	postgresURL  = strings.TrimSpace(os.Getenv("MNEMO_TEST_POSTGRES"))
	schemaPrefix = "compat_go_" + randomHex(4)
	tmpRoot      string

	schemasMu sync.Mutex
	schemas   []string

	// shared is the server most tests use (started by TestMain).
	shared *Server
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// The SDK reads credentials, the base URL and headers from ANTHROPIC_*; none of that may
	// leak into the suite.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "ANTHROPIC_") {
			os.Unsetenv(name)
		}
	}
	os.Setenv("NO_PROXY", "127.0.0.1,localhost")
	if err := checkSDKVersion(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch backend {
	case "sqlite":
	case "postgres":
		if postgresURL == "" {
			fmt.Fprintln(os.Stderr, "MNEMO_COMPAT_DATABASE=postgres needs MNEMO_TEST_POSTGRES (e.g. the URL `.ci/postgres start` prints)")
			return 1
		}
		if _, err := psql(postgresURL, "SELECT 1"); err != nil {
			fmt.Fprintf(os.Stderr, "PostgreSQL at MNEMO_TEST_POSTGRES does not answer: %v\n", err)
			return 1
		}
	default:
		fmt.Fprintf(os.Stderr, "MNEMO_COMPAT_DATABASE must be sqlite or postgres, not %q\n", backend)
		return 1
	}
	var err error
	tmpRoot, err = os.MkdirTemp("", "mnemo-compat-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmpRoot, _ = filepath.EvalSymlinks(tmpRoot)
	defer os.RemoveAll(tmpRoot)
	defer dropSchemas()

	shared, err = StartServer(ServerOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	shared.Stop()
	fmt.Printf("# backend: %s\n", backend)
	return code
}

func checkSDKVersion() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", sdkModule).Output()
	if err != nil {
		// Without the go tool (a test binary run on its own) the build itself pinned go.mod's version.
		return nil
	}
	if got := strings.TrimSpace(string(out)); got != sdkVersion {
		return fmt.Errorf("the suite is written for %s@%s, go.mod resolves %s", sdkModule, sdkVersion, got)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func unique(prefix string) string { return prefix + "-" + randomHex(6) }

func sha(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL housekeeping (psql only; mnemo creates each schema itself).
// ---------------------------------------------------------------------------------------------

func psqlBinary() string {
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	if len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

func psql(url, sql string) (string, error) {
	bin := psqlBinary()
	if bin == "" {
		return "", errors.New("psql is not installed (it comes with PostgreSQL)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-Atq", "-d", url, "-c", sql)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("psql failed: %s", strings.ReplaceAll(strings.TrimSpace(stderr.String()), url, "<url>"))
	}
	return string(out), nil
}

func dropSchemas() {
	schemasMu.Lock()
	defer schemasMu.Unlock()
	if len(schemas) == 0 {
		return
	}
	if os.Getenv("MNEMO_COMPAT_KEEP_SCHEMAS") == "1" {
		fmt.Printf("# kept schemas: %s\n", strings.Join(schemas, " "))
		return
	}
	for _, s := range schemas {
		if _, err := psql(postgresURL, fmt.Sprintf(`DROP SCHEMA IF EXISTS "%s" CASCADE`, s)); err != nil {
			fmt.Fprintf(os.Stderr, "# cannot drop schema %s: %v\n", s, err)
		}
	}
}

// databaseURL is a fresh database for one server of this run's backend.
func databaseURL(workdir string) string {
	if backend == "postgres" {
		schema := schemaPrefix + "_" + randomHex(4)
		schemasMu.Lock()
		schemas = append(schemas, schema)
		schemasMu.Unlock()
		sep := "?"
		if strings.Contains(postgresURL, "?") {
			sep = "&"
		}
		return postgresURL + sep + "options=-csearch_path%3D" + schema
	}
	return "sqlite://" + filepath.Join(workdir, "mnemo.sqlite")
}

// ---------------------------------------------------------------------------------------------
// `mnemo serve` on 127.0.0.1:0.
// ---------------------------------------------------------------------------------------------

type ServerOptions struct {
	Args []string // extra flags
}

type Server struct {
	Workdir string
	APIKey  string
	BaseURL string
	LogPath string
	argv    []string
	cmd     *exec.Cmd
	done    chan struct{}
}

var listenLine = regexp.MustCompile(`^listening on (http://127\.0\.0\.1:\d+)$`)

func mnemoBinary() (string, error) {
	bin := strings.TrimSpace(os.Getenv("MNEMO_BIN"))
	if bin == "" {
		return "", errors.New("set MNEMO_BIN to the mnemo binary, e.g. MNEMO_BIN=$PWD/target/debug/mnemo")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("MNEMO_BIN: %w", err)
	}
	return abs, nil
}

// StartServer starts `mnemo serve --listen 127.0.0.1:0 --database <fresh> --api-key <random>`
// and waits for its `listening on` line.
func StartServer(opts ServerOptions) (*Server, error) {
	bin, err := mnemoBinary()
	if err != nil {
		return nil, err
	}
	workdir, err := os.MkdirTemp(tmpRoot, "server-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		Workdir: workdir,
		// Operator keys are at least 32 characters.
		APIKey:  "sk-compat-go-" + randomHex(16),
		LogPath: filepath.Join(workdir, "server.stderr.log"),
		done:    make(chan struct{}),
	}
	s.argv = append([]string{"serve", "--listen", "127.0.0.1:0", "--database", databaseURL(workdir), "--api-key", s.APIKey}, opts.Args...)
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	s.cmd = exec.Command(bin, s.argv...)
	s.cmd.Stderr = logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop() signals the group
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- strings.TrimRight(line, "\r\n")
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case line := <-first:
		m := listenLine.FindStringSubmatch(line)
		if m == nil {
			s.kill(syscall.SIGKILL)
			return nil, fmt.Errorf("first stdout line must be `listening on http://127.0.0.1:PORT`, got %q\n%s", line, s.LogTail(40))
		}
		s.BaseURL = m[1]
	case <-time.After(startTimeout):
		s.kill(syscall.SIGKILL)
		return nil, fmt.Errorf("no `listening on` line within %s\n%s", startTimeout, s.LogTail(40))
	}
	return s, nil
}

// startServerT starts a server for one test and stops it when the test ends.
func startServerT(t *testing.T, args ...string) *Server {
	t.Helper()
	s, err := StartServer(ServerOptions{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) kill(sig syscall.Signal) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	}
}

// Stop sends SIGTERM, then SIGKILL after 10 s.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.kill(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill(syscall.SIGKILL)
		<-s.done
	}
}

func (s *Server) LogTail(lines int) string {
	data, err := os.ReadFile(s.LogPath)
	if err != nil {
		return "    | (no server log)"
	}
	all := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "    | " + strings.Join(all, "\n    | ")
}

// Client is an SDK client for this server: only the base URL and the key (plus a request
// timeout) differ from the defaults.
func (s *Server) Client(extra ...option.RequestOption) anthropic.Client {
	return newClient(s.BaseURL, s.APIKey, extra...)
}

func newClient(baseURL, key string, extra ...option.RequestOption) anthropic.Client {
	opts := append([]option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(key),
		option.WithRequestTimeout(requestTimeout),
	}, extra...)
	return anthropic.NewClient(opts...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ---------------------------------------------------------------------------------------------
// Plain HTTP for what the SDK has no method for.
// ---------------------------------------------------------------------------------------------

type rawResponse struct {
	Status int
	Header http.Header
	Body   map[string]any
	Text   string
}

func apiRequest(t *testing.T, baseURL, key, method, path string, body any) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, baseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("authorization", "Bearer "+key)
	req.Header.Set("anthropic-version", anthropicVersion)
	req.Header.Set("anthropic-beta", agentsBeta)
	req.Header.Set("content-type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	out := rawResponse{Status: res.StatusCode, Header: res.Header, Text: string(data)}
	_ = json.Unmarshal(data, &out.Body)
	return out
}

// ---------------------------------------------------------------------------------------------
// Assertions.
// ---------------------------------------------------------------------------------------------

var rfc3339UTC = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`)

// ok fails the test on an unexpected error.
func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func eq[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func eqSlice[T comparable](t *testing.T, got, want []T, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func prefixed(t *testing.T, value, prefix, what string) {
	t.Helper()
	if !strings.HasPrefix(value, prefix) {
		t.Fatalf("%s: expected a string starting with %s, got %q", what, prefix, value)
	}
}

// rawField is the JSON text of a top-level field of a response as received.
func rawField(t *testing.T, raw, field string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("response is not a JSON object: %v", err)
	}
	return string(m[field])
}

func rfc3339Field(t *testing.T, raw, field, what string) {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(rawField(t, raw, field)), &s); err != nil || !rfc3339UTC.MatchString(s) {
		t.Fatalf("%s.%s: expected an RFC 3339 UTC timestamp ending in Z, got %s", what, field, rawField(t, raw, field))
	}
}

func checkStore(t *testing.T, s *anthropic.BetaManagedAgentsMemoryStore) {
	t.Helper()
	eq(t, string(s.Type), "memory_store", "store.type")
	prefixed(t, s.ID, "memstore_", "store.id")
	rfc3339Field(t, s.RawJSON(), "created_at", "store")
	rfc3339Field(t, s.RawJSON(), "updated_at", "store")
	if s.Metadata == nil {
		t.Fatalf("store.metadata must be an object, got %s", rawField(t, s.RawJSON(), "metadata"))
	}
}

// checkMemory checks a memory's shape; with full, its content is present, else null.
func checkMemory(t *testing.T, m *anthropic.BetaManagedAgentsMemory, content string, full bool) {
	t.Helper()
	eq(t, string(m.Type), "memory", "memory.type")
	prefixed(t, m.ID, "mem_", "memory.id")
	prefixed(t, m.MemoryStoreID, "memstore_", "memory.memory_store_id")
	prefixed(t, m.MemoryVersionID, "memver_", "memory.memory_version_id")
	rfc3339Field(t, m.RawJSON(), "created_at", "memory")
	rfc3339Field(t, m.RawJSON(), "updated_at", "memory")
	eq(t, m.ContentSha256, sha(content), "memory.content_sha256")
	eq(t, m.ContentSizeBytes, int64(len(content)), "memory.content_size_bytes")
	if full {
		eq(t, m.Content, content, "memory.content (full view)")
	} else {
		eq(t, rawField(t, m.RawJSON(), "content"), "null", "memory.content (basic view)")
	}
}

// expectError requires err to be the SDK's *anthropic.Error for HTTP status and error type
// errType, with the error envelope and the request id (header = body request_id = RequestID).
func expectError(t *testing.T, err error, status int, errType, what string) *anthropic.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: expected HTTP %d %s, but the call succeeded", what, status, errType)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: expected *anthropic.Error, got %T: %v", what, err, err)
	}
	if apiErr.StatusCode != status {
		t.Fatalf("%s: HTTP status %d, want %d (body %s)", what, apiErr.StatusCode, status, apiErr.RawJSON())
	}
	eq(t, string(apiErr.Type()), errType, what+": the SDK error's Type()")
	var body struct {
		Type      string         `json:"type"`
		Error     map[string]any `json:"error"`
		RequestID string         `json:"request_id"`
	}
	if e := json.Unmarshal([]byte(apiErr.RawJSON()), &body); e != nil {
		t.Fatalf("%s: the error body is not JSON: %q", what, apiErr.RawJSON())
	}
	eq(t, body.Type, "error", what+": body.type")
	eq(t, body.Error["type"], any(errType), what+": body.error.type")
	if msg, _ := body.Error["message"].(string); msg == "" || msg != apiErr.Message {
		t.Fatalf("%s: body.error.message %q vs the SDK error's Message %q", what, msg, apiErr.Message)
	}
	header := apiErr.Response.Header.Get("request-id")
	prefixed(t, header, "req_", what+": request-id header")
	eq(t, body.RequestID, header, what+": body.request_id vs the request-id header")
	eq(t, apiErr.RequestID, header, what+": the SDK error's RequestID")
	return apiErr
}

func expectInvalid(t *testing.T, err error, what string) *anthropic.Error {
	t.Helper()
	return expectError(t, err, 400, "invalid_request_error", what)
}

func expectNotFound(t *testing.T, err error, what string) *anthropic.Error {
	t.Helper()
	return expectError(t, err, 404, "not_found_error", what)
}

// errorField is a field of the error object of an *anthropic.Error's body.
func errorField(t *testing.T, e *anthropic.Error, field string) any {
	t.Helper()
	var body struct {
		Error map[string]any `json:"error"`
	}
	_ = json.Unmarshal([]byte(e.RawJSON()), &body)
	return body.Error[field]
}

// tick waits long enough that the next write gets a strictly later timestamp even at 1 s
// precision.
func tick() { time.Sleep(1100 * time.Millisecond) }
