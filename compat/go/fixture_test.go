package compat

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/pagination"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// fixture is the shared server's client with shortcuts for the memory API.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	server *Server
	client anthropic.Client
}

func newFixture(t *testing.T) *fixture {
	t.Parallel()
	return &fixture{t: t, ctx: ctxT(t), server: shared, client: shared.Client()}
}

func (f *fixture) stores() *anthropic.BetaMemoryStoreService { return &f.client.Beta.MemoryStores }
func (f *fixture) memories() *anthropic.BetaMemoryStoreMemoryService {
	return &f.client.Beta.MemoryStores.Memories
}
func (f *fixture) versions() *anthropic.BetaMemoryStoreMemoryVersionService {
	return &f.client.Beta.MemoryStores.MemoryVersions
}

func (f *fixture) newStore() *anthropic.BetaManagedAgentsMemoryStore {
	f.t.Helper()
	s, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: unique("compat-go")})
	ok(f.t, err, "create a store")
	return s
}

func (f *fixture) newMemory(storeID, path, content string) *anthropic.BetaManagedAgentsMemory {
	f.t.Helper()
	m, err := f.memories().New(f.ctx, storeID, anthropic.BetaMemoryStoreMemoryNewParams{Path: path, Content: param.NewOpt(content)})
	ok(f.t, err, "create "+path)
	return m
}

func (f *fixture) get(storeID, memoryID string) *anthropic.BetaManagedAgentsMemory {
	f.t.Helper()
	m, err := f.memories().Get(f.ctx, memoryID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: storeID})
	ok(f.t, err, "retrieve "+memoryID)
	return m
}

// collect walks an auto-pager to its end.
func collect[T any](t *testing.T, next func() bool, current func() T, errf func() error) []T {
	t.Helper()
	var out []T
	for next() {
		out = append(out, current())
		if len(out) > 100_000 {
			t.Fatal("more than 100,000 items; pagination does not terminate")
		}
	}
	if err := errf(); err != nil {
		t.Fatalf("auto-pagination: %v", err)
	}
	return out
}

func (f *fixture) allMemories(storeID string, params anthropic.BetaMemoryStoreMemoryListParams) []anthropic.BetaManagedAgentsMemoryListItemUnion {
	f.t.Helper()
	p := f.memories().ListAutoPaging(f.ctx, storeID, params)
	return collect(f.t, p.Next, p.Current, p.Err)
}

func (f *fixture) allVersions(storeID string, params anthropic.BetaMemoryStoreMemoryVersionListParams) []anthropic.BetaManagedAgentsMemoryVersion {
	f.t.Helper()
	p := f.versions().ListAutoPaging(f.ctx, storeID, params)
	return collect(f.t, p.Next, p.Current, p.Err)
}

// allPages follows GetNextPage from a first page.
func allPages[T any](t *testing.T, first *pagination.PageCursor[T], err error) []*pagination.PageCursor[T] {
	t.Helper()
	if err != nil {
		t.Fatalf("first page: %v", err)
	}
	pages := []*pagination.PageCursor[T]{first}
	for page := first; page.NextPage != ""; {
		next, err := page.GetNextPage()
		if err != nil {
			t.Fatalf("GetNextPage: %v", err)
		}
		if next == nil {
			break
		}
		pages = append(pages, next)
		page = next
		if len(pages) > 10_000 {
			t.Fatal("more than 10,000 pages")
		}
	}
	return pages
}

func paths(items []anthropic.BetaManagedAgentsMemoryListItemUnion) []string {
	out := make([]string, len(items))
	for i, m := range items {
		out[i] = m.Path
	}
	return out
}

func precondition(content string) anthropic.BetaManagedAgentsPreconditionParam {
	return anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt(sha(content))}
}
