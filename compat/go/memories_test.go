// Memories through the Go SDK: create, retrieve, update (content_sha256 preconditions), rename,
// conflicts and limits as typed *anthropic.Error, delete, list views, depth, path_prefix, pages.
package compat

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

func TestMemoriesCreateBasicByDefaultFullOnRequest(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/notes/todo.md", "- buy milk\n")
	checkMemory(t, mem, "- buy milk\n", false)
	eq(t, mem.Path, "/notes/todo.md", "path")
	eq(t, mem.MemoryStoreID, store.ID, "memory_store_id")
	full, err := f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{
		Path: "/notes/full.md", Content: param.NewOpt("héllo ✓"), View: anthropic.BetaManagedAgentsMemoryViewFull,
	})
	ok(t, err, "create view=full")
	checkMemory(t, full, "héllo ✓", true)
	empty, err := f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{
		Path: "/empty.md", Content: param.NewOpt(""), View: anthropic.BetaManagedAgentsMemoryViewFull,
	})
	ok(t, err, "create empty")
	checkMemory(t, empty, "", true)
	eq(t, empty.ContentSha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256 of nothing")
}

func TestMemoriesRetrieveFullByDefaultBasicOnRequest(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/r.md", "read me")
	got := f.get(store.ID, mem.ID)
	checkMemory(t, got, "read me", true)
	eq(t, got.MemoryVersionID, mem.MemoryVersionID, "memory_version_id")
	eq(t, got.CreatedAt, mem.CreatedAt, "created_at")
	basic, err := f.memories().Get(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: store.ID, View: anthropic.BetaManagedAgentsMemoryViewBasic})
	ok(t, err, "retrieve view=basic")
	checkMemory(t, basic, "read me", false)
	_, err = f.memories().Get(f.ctx, unknownMemory, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "unknown memory")
	_, err = f.memories().Get(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: unknownStore})
	expectNotFound(t, err, "the memory through an unknown store")
	_, err = f.memories().Get(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: store.ID, View: "everything"})
	expectInvalid(t, err, "view=everything")
}

func TestMemoriesInvalidPathsAndOversizedContent(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	for _, bad := range []string{"no-slash.md", "/a//b.md", "/a/../b.md", "/trailing/", "/ctl\u0001.md", "/" + strings.Repeat("s/", 20) + "x.md"} {
		_, err := f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: bad, Content: param.NewOpt("x")})
		expectInvalid(t, err, fmt.Sprintf("create at %q", bad))
	}
	_, err := f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/big.md", Content: param.NewOpt(strings.Repeat("x", 102_401))})
	expectError(t, err, 413, "request_too_large", "content of 102,401 bytes")
	checkMemory(t, f.newMemory(store.ID, "/max.md", strings.Repeat("x", 102_400)), strings.Repeat("x", 102_400), false)
}

func expectPathConflict(t *testing.T, err error, what string, blocking *anthropic.BetaManagedAgentsMemory) {
	t.Helper()
	e := expectError(t, err, 409, "memory_path_conflict_error", what)
	eq(t, errorField(t, e, "conflicting_memory_id"), any(blocking.ID), what+": error.conflicting_memory_id")
	eq(t, errorField(t, e, "conflicting_path"), any(blocking.Path), what+": error.conflicting_path")
	eq(t, e.Response.Header.Get("x-should-retry"), "false", what+": x-should-retry")
}

func TestMemoriesPathConflictsNameTheMemoryInTheWay(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	a := f.newMemory(store.ID, "/a.md", "a")
	d := f.newMemory(store.ID, "/dir/file.md", "d")
	create := func(p string) error {
		_, err := f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: p, Content: param.NewOpt("x")})
		return err
	}
	expectPathConflict(t, create("/a.md"), "create on a taken path", a)
	expectPathConflict(t, create("/dir"), "create an ancestor of a memory", d)
	expectPathConflict(t, create("/a.md/child.md"), "create below a memory", a)
	_, err := f.memories().Update(f.ctx, d.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Path: param.NewOpt("/a.md")})
	expectPathConflict(t, err, "rename onto a taken path", a)
	eqSlice(t, paths(f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{})), []string{"/a.md", "/dir/file.md"}, "the store")
}

func TestMemoriesUpdateUnconditionallyAndWithAMatchingPrecondition(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/u.md", "one")
	tick()
	upd, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("two")})
	ok(t, err, "update")
	checkMemory(t, upd, "two", false)
	eq(t, upd.ID, mem.ID, "id")
	if upd.MemoryVersionID == mem.MemoryVersionID {
		t.Fatal("an update writes a new version")
	}
	if !upd.UpdatedAt.After(mem.UpdatedAt) {
		t.Fatalf("updated_at does not advance: %v then %v", mem.UpdatedAt, upd.UpdatedAt)
	}
	cas, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: store.ID, Content: param.NewOpt("three"), Precondition: precondition("two"), View: anthropic.BetaManagedAgentsMemoryViewFull,
	})
	ok(t, err, "conditional update")
	checkMemory(t, cas, "three", true)
	eq(t, f.get(store.ID, mem.ID).Content, "three", "stored content")
}

func TestMemoriesStalePreconditionChangesNothing(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/p.md", "current")
	_, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("mine"), Precondition: precondition("stale")})
	e := expectError(t, err, 409, "memory_precondition_failed_error", "update with a stale precondition")
	eq(t, e.Response.Header.Get("x-should-retry"), "false", "x-should-retry")
	_, err = f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Path: param.NewOpt("/moved.md"), Precondition: precondition("stale")})
	expectError(t, err, 409, "memory_precondition_failed_error", "rename with a stale precondition")
	got := f.get(store.ID, mem.ID)
	eqSlice(t, []string{got.Content, got.Path, got.MemoryVersionID}, []string{"current", "/p.md", mem.MemoryVersionID}, "nothing changed")
	eq(t, len(f.allVersions(store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: param.NewOpt(mem.ID)})), 1, "versions")
	_, err = f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: store.ID, Content: param.NewOpt("x"), Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt("XYZ")},
	})
	expectInvalid(t, err, "a malformed content_sha256")
}

func TestMemoriesRetriedUpdateAlreadyAppliedWritesNoVersion(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/retry.md", "old")
	params := anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("new"), Precondition: precondition("old")}
	first, err := f.memories().Update(f.ctx, mem.ID, params)
	ok(t, err, "first update")
	again, err := f.memories().Update(f.ctx, mem.ID, params)
	ok(t, err, "the same update again")
	eq(t, again.MemoryVersionID, first.MemoryVersionID, "no new version")
	_, err = f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("other"), Precondition: precondition("old")})
	expectError(t, err, 409, "memory_precondition_failed_error", "the stale precondition with another content")
	noop, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID})
	ok(t, err, "an empty update")
	eq(t, noop.MemoryVersionID, first.MemoryVersionID, "an empty update writes no version")
	eq(t, len(f.allVersions(store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: param.NewOpt(mem.ID)})), 2, "versions")
}

func TestMemoriesRenameKeepsTheID(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/old/name.md", "keep me")
	ren, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Path: param.NewOpt("/new/place/name.md")})
	ok(t, err, "rename")
	checkMemory(t, ren, "keep me", false)
	eq(t, ren.ID, mem.ID, "id")
	eq(t, ren.Path, "/new/place/name.md", "path")
	eq(t, f.newMemory(store.ID, "/old/name.md", "reuse").Path, "/old/name.md", "the old path is free")
	both, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: store.ID, Path: param.NewOpt("/final.md"), Content: param.NewOpt("changed"), Precondition: precondition("keep me"), View: anthropic.BetaManagedAgentsMemoryViewFull,
	})
	ok(t, err, "rename + content + precondition")
	checkMemory(t, both, "changed", true)
	eq(t, both.Path, "/final.md", "path")
}

func TestMemoriesDeleteWithExpectedContentSha256(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/d.md", "v1")
	_, err := f.memories().Delete(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: store.ID, ExpectedContentSha256: param.NewOpt(sha("not v1"))})
	e := expectError(t, err, 409, "memory_precondition_failed_error", "delete with a mismatching sha")
	eq(t, e.Response.Header.Get("x-should-retry"), "false", "x-should-retry")
	eq(t, f.get(store.ID, mem.ID).Content, "v1", "still there")
	res, err := f.memories().Delete(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: store.ID, ExpectedContentSha256: param.NewOpt(sha("v1"))})
	ok(t, err, "delete with the matching sha")
	eq(t, res.ID, mem.ID, "deleted id")
	eq(t, string(res.Type), "memory_deleted", "deleted type")
	_, err = f.memories().Get(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "retrieve a deleted memory")
	_, err = f.memories().Delete(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "delete twice")
	eq(t, len(f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{})), 0, "the store is empty")
}

func byteOrder(ps []string) []string {
	out := append([]string(nil), ps...)
	sort.Strings(out) // Go compares strings bytewise
	return out
}

func (f *fixture) seed(storeID string, ps []string) {
	f.t.Helper()
	for _, p := range ps {
		f.newMemory(storeID, p, "content of "+p)
	}
}

func TestMemoriesListViewsInByteOrder(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	ps := []string{"/b.md", "/a/z.md", "/a/b/c.md", "/A.md", "/a-b.md", "/a.b", "/aa/x.md", "/~tilde", "/0.md", "/é.md"}
	f.seed(store.ID, ps)
	want := byteOrder(ps)
	basic := f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	eqSlice(t, paths(basic), want, "default listing order")
	for _, m := range basic {
		mem := m.AsMemory()
		checkMemory(t, &mem, "content of "+m.Path, false)
	}
	basic3 := f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewBasic, Limit: param.NewOpt[int64](3)})
	eqSlice(t, paths(basic3), want, "view=basic limit=3 auto-pagination")
	full := f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt[int64](4)})
	eqSlice(t, paths(full), want, "view=full limit=4 auto-pagination")
	for _, m := range full {
		mem := m.AsMemory()
		checkMemory(t, &mem, "content of "+m.Path, true)
	}
	page, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	ok(t, err, "one page")
	eq(t, len(page.Data), len(ps), "everything on the default first page")
	eq(t, page.NextPage, "", "next_page")
}

func TestMemoriesPagingFullAtMost20APageBasicAutoAndByHand(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	var ps []string
	for i := range 45 {
		ps = append(ps, fmt.Sprintf("/cap/%03d.md", i))
	}
	f.seed(store.ID, ps)
	firstFullpages, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt[int64](100)})
	fullPages := allPages(t, firstFullpages, err)
	if len(fullPages) < 3 {
		t.Fatalf("view=full over 45 memories needs >= 3 pages, got %d", len(fullPages))
	}
	var walked []string
	for _, p := range fullPages {
		if len(p.Data) == 0 || len(p.Data) > 20 {
			t.Fatalf("a view=full page holds %d items", len(p.Data))
		}
		for _, m := range p.Data {
			eq(t, m.Content, "content of "+m.Path, "content")
			walked = append(walked, m.Path)
		}
	}
	eqSlice(t, walked, ps, "view=full pages")
	eqSlice(t, paths(f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})), ps, "view=full auto-pagination")

	one, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewBasic, Limit: param.NewOpt[int64](100)})
	ok(t, err, "view=basic limit=100")
	eq(t, len(one.Data), 45, "view=basic limit=100: one page")
	eq(t, one.NextPage, "", "next_page")

	firstBasicpages, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewBasic, Limit: param.NewOpt[int64](7)})
	basicPages := allPages(t, firstBasicpages, err)
	eq(t, len(basicPages), 7, "ceil(45 / 7) pages")
	walked = nil
	for _, p := range basicPages {
		walked = append(walked, paths(p.Data)...)
	}
	eqSlice(t, walked, ps, "view=basic limit=7 pages")

	walked = nil
	cursor := ""
	for range 100 {
		params := anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt[int64](10)}
		if cursor != "" {
			params.Page = param.NewOpt(cursor)
		}
		page, err := f.memories().List(f.ctx, store.ID, params)
		ok(t, err, "a page by hand")
		walked = append(walked, paths(page.Data)...)
		if page.NextPage == "" {
			break
		}
		if page.NextPage == cursor {
			t.Fatalf("next_page did not advance (stuck at %s)", cursor)
		}
		cursor = page.NextPage
	}
	eqSlice(t, walked, ps, "view=full limit=10 by hand")
	for _, limit := range []int64{0, 101} {
		_, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{Limit: param.NewOpt(limit)})
		expectInvalid(t, err, fmt.Sprintf("limit=%d", limit))
	}
}

func TestMemoriesPathPrefixAndDepth(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	f.seed(store.ID, []string{"/a.md", "/b/c.md", "/b/d/e.md", "/b/f.md", "/c/x/y/z.md", "/d.md", "/b.md", "/bb/x.md"})
	items := func(params anthropic.BetaMemoryStoreMemoryListParams) []string {
		params.Depth = param.NewOpt[int64](1)
		var out []string
		for _, i := range f.allMemories(store.ID, params) {
			out = append(out, i.Type+" "+i.Path)
		}
		return out
	}
	root := []string{"memory /a.md", "memory /b.md", "memory_prefix /b/", "memory_prefix /bb/", "memory_prefix /c/", "memory /d.md"}
	eqSlice(t, items(anthropic.BetaMemoryStoreMemoryListParams{}), root, "depth=1 at the root")
	eqSlice(t, items(anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull}), root, "depth=1, view=full")
	eqSlice(t, items(anthropic.BetaMemoryStoreMemoryListParams{Limit: param.NewOpt[int64](1)}), root, "depth=1, limit=1 auto-pagination")
	eqSlice(t, items(anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: param.NewOpt("/b/")}), []string{"memory /b/c.md", "memory_prefix /b/d/", "memory /b/f.md"}, "depth=1 under /b/")
	prefix := f.allMemories(store.ID, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: param.NewOpt("/b/")})
	eqSlice(t, paths(prefix), []string{"/b/c.md", "/b/d/e.md", "/b/f.md"}, "path_prefix matches whole segments")
	if p, isMem := prefix[0].AsAny().(anthropic.BetaManagedAgentsMemory); !isMem || p.ID == "" {
		t.Fatalf("a listed memory is the SDK's BetaManagedAgentsMemory, got %T", prefix[0].AsAny())
	}
	_, err := f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{PathPrefix: param.NewOpt("/b")})
	expectInvalid(t, err, "path_prefix without a trailing /")
	_, err = f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{Depth: param.NewOpt[int64](2)})
	expectInvalid(t, err, "depth=2")
}

func TestMemoriesConcurrentConditionalUpdatesOneWins(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/race.md", "base")
	var wg sync.WaitGroup
	results := make([]*anthropic.BetaManagedAgentsMemory, 6)
	errs := make([]error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{
				MemoryStoreID: store.ID, Content: param.NewOpt(fmt.Sprintf("writer %d", i)), Precondition: precondition("base"),
			})
		}()
	}
	wg.Wait()
	var winner *anthropic.BetaManagedAgentsMemory
	for i, err := range errs {
		if err == nil {
			if winner != nil {
				t.Fatal("more than one conditional update won")
			}
			winner = results[i]
			continue
		}
		expectError(t, err, 409, "memory_precondition_failed_error", "a losing writer")
	}
	if winner == nil {
		t.Fatal("no conditional update won")
	}
	eq(t, f.get(store.ID, mem.ID).ContentSha256, winner.ContentSha256, "the stored content is the winner's")
	eq(t, len(f.allVersions(store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: param.NewOpt(mem.ID)})), 2, "created + the winning update")
}
