// Memory stores through the Go SDK: create, retrieve, update (metadata patch), list (order,
// created_at filters, pages), archive, delete; unknown ids, a wrong key, and the beta headers
// the SDK sends.
package compat

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

func (f *fixture) storesMarked(marker string, params anthropic.BetaMemoryStoreListParams) []anthropic.BetaManagedAgentsMemoryStore {
	f.t.Helper()
	p := f.stores().ListAutoPaging(f.ctx, params)
	var out []anthropic.BetaManagedAgentsMemoryStore
	for _, s := range collect(f.t, p.Next, p.Current, p.Err) {
		if s.Metadata["marker"] == marker {
			out = append(out, s)
		}
	}
	return out
}

func storeIDs(stores []anthropic.BetaManagedAgentsMemoryStore) []string {
	out := make([]string, len(stores))
	for i, s := range stores {
		out[i] = s.ID
	}
	return out
}

func TestStoresCreateWithDefaultsAndRetrieve(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	checkStore(t, store)
	eq(t, store.Description, "", "description defaults to empty")
	eq(t, len(store.Metadata), 0, "metadata defaults to {}")
	eq(t, rawField(t, store.RawJSON(), "archived_at"), "null", "archived_at")
	got, err := f.stores().Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{})
	ok(t, err, "retrieve")
	eq(t, got.RawJSON(), store.RawJSON(), "retrieve equals create")
}

func TestStoresCreateWithDescriptionAndMetadata(t *testing.T) {
	f := newFixture(t)
	metadata := map[string]string{"end_user": "u-42", strings.Repeat("k", 64): strings.Repeat("v", 512), "unicode": "héllo ✓"}
	store, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Ünïcode name ✓", Description: param.NewOpt("remember things"), Metadata: metadata})
	ok(t, err, "create")
	checkStore(t, store)
	eq(t, store.Name, "Ünïcode name ✓", "name")
	eq(t, store.Description, "remember things", "description")
	eq(t, fmt.Sprint(store.Metadata), fmt.Sprint(metadata), "metadata")
	twin, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "Ünïcode name ✓"})
	ok(t, err, "a second store of the same name")
	if twin.ID == store.ID {
		t.Fatal("names are not unique: a second store gets its own id")
	}
}

func TestStoresCreateValidationIsInvalidRequest(t *testing.T) {
	f := newFixture(t)
	many := map[string]string{}
	for i := range 17 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for what, params := range map[string]anthropic.BetaMemoryStoreNewParams{
		"an empty name":                 {Name: ""},
		"17 metadata pairs":             {Name: "ok", Metadata: many},
		"a metadata value of 513 chars": {Name: "ok", Metadata: map[string]string{"k": strings.Repeat("v", 513)}},
	} {
		_, err := f.stores().New(f.ctx, params)
		expectInvalid(t, err, "create a store with "+what)
	}
}

func TestStoresUnknownStoreIsNotFound(t *testing.T) {
	f := newFixture(t)
	_, err := f.stores().Get(f.ctx, unknownStore, anthropic.BetaMemoryStoreGetParams{})
	expectNotFound(t, err, "retrieve")
	_, err = f.stores().Update(f.ctx, unknownStore, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("x")})
	expectNotFound(t, err, "update")
	_, err = f.stores().Archive(f.ctx, unknownStore, anthropic.BetaMemoryStoreArchiveParams{})
	expectNotFound(t, err, "archive")
	_, err = f.stores().Delete(f.ctx, unknownStore, anthropic.BetaMemoryStoreDeleteParams{})
	expectNotFound(t, err, "delete")
}

func TestStoresUpdateNameDescriptionAndMetadataPatch(t *testing.T) {
	f := newFixture(t)
	store, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "before", Description: param.NewOpt("desc"), Metadata: map[string]string{"a": "1", "b": "2", "c": "3"}})
	ok(t, err, "create")
	tick()
	upd, err := f.stores().Update(f.ctx, store.ID, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("after"), Description: param.NewOpt("")})
	ok(t, err, "update name and description")
	eq(t, upd.Name, "after", "name")
	eq(t, upd.Description, "", "description")
	eq(t, fmt.Sprint(upd.Metadata), fmt.Sprint(map[string]string{"a": "1", "b": "2", "c": "3"}), "metadata untouched")
	if !upd.UpdatedAt.After(store.UpdatedAt) {
		t.Fatal("updated_at advances")
	}
	// A null value removes a key; the Go SDK's map[string]string cannot say null, so the patch
	// sets that key of the body with the SDK's own request option.
	upd, err = f.stores().Update(f.ctx, store.ID, anthropic.BetaMemoryStoreUpdateParams{Metadata: map[string]string{"a": "one", "d": "4"}},
		option.WithJSONSet("metadata.b", nil), option.WithJSONSet("metadata.zz", nil))
	ok(t, err, "metadata patch")
	eq(t, fmt.Sprint(upd.Metadata), fmt.Sprint(map[string]string{"a": "one", "c": "3", "d": "4"}), "upsert a, remove b, keep c, add d")
}

func TestStoresListNewestFirstAndPages(t *testing.T) {
	f := newFixture(t)
	marker := unique("list")
	var created []string
	for i := range 5 {
		s, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: fmt.Sprintf("list-%d", i), Metadata: map[string]string{"marker": marker}})
		ok(t, err, "create")
		created = append([]string{s.ID}, created...)
	}
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{Limit: param.NewOpt[int64](2)})), created, "newest first, auto-pagination limit=2")
	firstPages, err := f.stores().List(f.ctx, anthropic.BetaMemoryStoreListParams{Limit: param.NewOpt[int64](1)})
	pages := allPages(t, firstPages, err)
	var walked []string
	for _, p := range pages {
		if len(p.Data) > 1 {
			t.Fatalf("a limit=1 page holds %d stores", len(p.Data))
		}
		for _, s := range p.Data {
			if s.Metadata["marker"] == marker {
				walked = append(walked, s.ID)
			}
		}
	}
	eqSlice(t, walked, created, "GetNextPage traversal")
	for _, limit := range []int64{0, 101} {
		_, err := f.stores().List(f.ctx, anthropic.BetaMemoryStoreListParams{Limit: param.NewOpt(limit)})
		expectInvalid(t, err, fmt.Sprintf("limit=%d", limit))
	}
}

func TestStoresListCreatedAtFilters(t *testing.T) {
	f := newFixture(t)
	marker := unique("created")
	mk := func() *anthropic.BetaManagedAgentsMemoryStore {
		s, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "c", Metadata: map[string]string{"marker": marker}})
		ok(t, err, "create")
		return s
	}
	a := mk()
	tick()
	b := mk()
	tick()
	c := mk()
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{CreatedAtGte: param.NewOpt(b.CreatedAt)})), []string{c.ID, b.ID}, "created_at[gte]")
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{CreatedAtLte: param.NewOpt(b.CreatedAt)})), []string{b.ID, a.ID}, "created_at[lte]")
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{CreatedAtGte: param.NewOpt(b.CreatedAt), CreatedAtLte: param.NewOpt(b.CreatedAt.Add(time.Millisecond))})), []string{b.ID}, "both")
}

func TestStoresArchiveAndIncludeArchived(t *testing.T) {
	f := newFixture(t)
	marker := unique("arch")
	live, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "live", Metadata: map[string]string{"marker": marker}})
	ok(t, err, "create")
	store, err := f.stores().New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: "to-archive", Metadata: map[string]string{"marker": marker}})
	ok(t, err, "create")
	mem := f.newMemory(store.ID, "/kept.md", "kept")
	arch, err := f.stores().Archive(f.ctx, store.ID, anthropic.BetaMemoryStoreArchiveParams{})
	ok(t, err, "archive")
	rfc3339Field(t, arch.RawJSON(), "archived_at", "archived store")
	eq(t, arch.Name, "to-archive", "name")
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{})), []string{live.ID}, "not listed by default")
	eqSlice(t, storeIDs(f.storesMarked(marker, anthropic.BetaMemoryStoreListParams{IncludeArchived: param.NewOpt(true)})), []string{store.ID, live.ID}, "include_archived")
	eq(t, f.get(store.ID, mem.ID).Content, "kept", "memories of an archived store are readable")
	_, err = f.memories().New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/new.md", Content: param.NewOpt("x")})
	expectInvalid(t, err, "create a memory in an archived store")
	_, err = f.stores().Update(f.ctx, store.ID, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("x")})
	expectInvalid(t, err, "update an archived store")
}

func TestStoresDelete(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/m.md", "m")
	res, err := f.stores().Delete(f.ctx, store.ID, anthropic.BetaMemoryStoreDeleteParams{})
	ok(t, err, "delete")
	eq(t, res.ID, store.ID, "deleted id")
	eq(t, string(res.Type), "memory_store_deleted", "deleted type")
	_, err = f.stores().Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{})
	expectNotFound(t, err, "retrieve a deleted store")
	_, err = f.memories().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{})
	expectNotFound(t, err, "list memories of a deleted store")
	_, err = f.memories().Get(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "retrieve a memory of a deleted store")
	_, err = f.versions().List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	expectNotFound(t, err, "list versions of a deleted store")
	_, err = f.stores().Delete(f.ctx, store.ID, anthropic.BetaMemoryStoreDeleteParams{})
	expectNotFound(t, err, "delete twice")
}

func TestStoresWrongKeyIsAuthenticationError(t *testing.T) {
	f := newFixture(t)
	bad := newClient(f.server.BaseURL, "sk-compat-go-wrong-"+randomHex(16), option.WithMaxRetries(0))
	_, err := bad.Beta.MemoryStores.List(f.ctx, anthropic.BetaMemoryStoreListParams{})
	expectError(t, err, 401, "authentication_error", "list with a wrong key")
}

// headerRecorder records the anthropic-beta header lines and the query of each request.
type headerRecorder struct {
	mu    sync.Mutex
	betas [][]string
	query []string
}

func (h *headerRecorder) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	h.mu.Lock()
	h.betas = append(h.betas, append([]string(nil), req.Header.Values("anthropic-beta")...))
	h.query = append(h.query, req.URL.RawQuery)
	h.mu.Unlock()
	return next(req)
}

func TestStoresTheSDKsBetaHeaderAndBetaQueryAreAccepted(t *testing.T) {
	f := newFixture(t)
	rec := &headerRecorder{}
	client := f.server.Client(option.WithMiddleware(rec.middleware))
	store, err := client.Beta.MemoryStores.New(f.ctx, anthropic.BetaMemoryStoreNewParams{Name: unique("hdr")})
	ok(t, err, "create")
	_, err = client.Beta.MemoryStores.Memories.New(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/a.md", Content: param.NewOpt("a")})
	ok(t, err, "create a memory")
	for i := range rec.betas {
		eqSlice(t, rec.betas[i], []string{memoryBeta}, "the beta header the SDK sent")
	}
	// The SDK keeps its `beta=true` qualifier in the request's context (v2.10.0 to v2.18.0 never
	// put it on the wire); a client that does send it is served the same.
	_, err = client.Beta.MemoryStores.Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{}, option.WithQuery("beta", "true"))
	ok(t, err, "retrieve with ?beta=true")
	eq(t, rec.query[len(rec.query)-1], "beta=true", "the query sent")
	_, err = client.Beta.MemoryStores.Memories.List(f.ctx, store.ID, anthropic.BetaMemoryStoreMemoryListParams{Limit: param.NewOpt[int64](5)}, option.WithQuery("beta", "true"))
	ok(t, err, "list memories with ?beta=true and limit")

	// A caller's extra beta is joined to the SDK's on one line; memory endpoints refuse the pair.
	rec.betas = nil
	_, err = client.Beta.MemoryStores.Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{Betas: []anthropic.AnthropicBeta{agentsBeta}})
	expectInvalid(t, err, "retrieve with both betas")
	eq(t, len(strings.Split(strings.Join(rec.betas[0], ","), ",")), 2, fmt.Sprintf("betas sent (%v)", rec.betas[0]))
	// The same pair on two header lines is refused too; another beta on a line of its own is not.
	rec.betas = nil
	_, err = client.Beta.MemoryStores.Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{}, option.WithHeaderAdd("anthropic-beta", agentsBeta))
	expectInvalid(t, err, "retrieve with both betas on two lines")
	eq(t, len(rec.betas[0]), 2, fmt.Sprintf("header lines sent (%v)", rec.betas[0]))
	_, err = client.Beta.MemoryStores.Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{}, option.WithHeaderAdd("anthropic-beta", "files-api-2025-04-14"))
	ok(t, err, "the memory beta and another on two lines")
	_, err = client.Beta.MemoryStores.Get(f.ctx, store.ID, anthropic.BetaMemoryStoreGetParams{}, option.WithHeader("anthropic-beta", agentsBeta))
	ok(t, err, "managed-agents-2026-04-01 alone")
}
