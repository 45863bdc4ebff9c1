// Memory versions through the Go SDK: one per mutation, views, retrieve, filters, pages, redact.
package compat

import (
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

type memoryHistory struct {
	store         *anthropic.BetaManagedAgentsMemoryStore
	mem, mod, ren *anthropic.BetaManagedAgentsMemory
}

// history takes one memory through create, modify, rename and delete.
func (f *fixture) history() memoryHistory {
	f.t.Helper()
	h := memoryHistory{store: f.newStore()}
	h.mem = f.newMemory(h.store.ID, "/h/one.md", "one")
	var err error
	h.mod, err = f.memories().Update(f.ctx, h.mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: h.store.ID, Content: param.NewOpt("one, edited")})
	ok(f.t, err, "modify")
	h.ren, err = f.memories().Update(f.ctx, h.mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: h.store.ID, Path: param.NewOpt("/h/renamed.md")})
	ok(f.t, err, "rename")
	_, err = f.memories().Delete(f.ctx, h.mem.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: h.store.ID})
	ok(f.t, err, "delete")
	return h
}

func operations(vs []anthropic.BetaManagedAgentsMemoryVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v.Operation)
	}
	return out
}

func versionIDs(vs []anthropic.BetaManagedAgentsMemoryVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

func checkVersion(t *testing.T, v *anthropic.BetaManagedAgentsMemoryVersion) {
	t.Helper()
	eq(t, string(v.Type), "memory_version", "version.type")
	prefixed(t, v.ID, "memver_", "version.id")
	prefixed(t, v.MemoryID, "mem_", "version.memory_id")
	prefixed(t, v.MemoryStoreID, "memstore_", "version.memory_store_id")
	rfc3339Field(t, v.RawJSON(), "created_at", "version")
}

func TestVersionsOnePerMutationNewestFirstByTheAPIKey(t *testing.T) {
	f := newFixture(t)
	h := f.history()
	vs := f.allVersions(h.store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
	eqSlice(t, operations(vs), []string{"deleted", "modified", "modified", "created"}, "operations")
	keys := map[string]bool{}
	for i := range vs {
		v := &vs[i]
		checkVersion(t, v)
		eq(t, v.MemoryID, h.mem.ID, "memory_id")
		eq(t, rawField(t, v.RawJSON(), "redacted_at"), "null", "redacted_at")
		eq(t, v.CreatedBy.Type, "api_actor", "created_by.type")
		prefixed(t, v.CreatedBy.APIKeyID, "apikey_", "created_by.api_key_id")
		keys[v.CreatedBy.APIKeyID] = true
	}
	deleted, renamed, modified, created := vs[0], vs[1], vs[2], vs[3]
	eq(t, created.ID, h.mem.MemoryVersionID, "created version id")
	eq(t, modified.ID, h.mod.MemoryVersionID, "modified version id")
	eq(t, renamed.ID, h.ren.MemoryVersionID, "renamed version id")
	eqSlice(t, []any{created.Path, created.Content, created.ContentSha256, created.ContentSizeBytes}, []any{"/h/one.md", "one", sha("one"), int64(3)}, "created")
	eqSlice(t, []string{modified.Path, modified.Content}, []string{"/h/one.md", "one, edited"}, "modified")
	eqSlice(t, []string{renamed.Path, renamed.Content}, []string{"/h/renamed.md", "one, edited"}, "a rename version carries the new path")
	eq(t, deleted.Path, "/h/renamed.md", "deleted path")
	for _, field := range []string{"content", "content_sha256", "content_size_bytes"} {
		eq(t, rawField(t, deleted.RawJSON(), field), "null", "deleted "+field)
	}
	eq(t, len(keys), 1, "one api_key_id for everything written with one key")
}

func TestVersionsListBasicAndFullRetrieve(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/v.md", "first")
	upd, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("second")})
	ok(t, err, "update")
	basic := f.allVersions(store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	eqSlice(t, operations(basic), []string{"modified", "created"}, "operations")
	for _, v := range basic {
		eq(t, rawField(t, v.RawJSON(), "content"), "null", "basic has no content")
	}
	eqSlice(t, []any{basic[0].ContentSha256, basic[1].ContentSha256, basic[0].ContentSizeBytes, basic[1].ContentSizeBytes}, []any{sha("second"), sha("first"), int64(6), int64(5)}, "digests and sizes")
	full := f.allVersions(store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
	eqSlice(t, []string{full[0].Content, full[1].Content}, []string{"second", "first"}, "full contents")

	got, err := f.versions().Get(f.ctx, upd.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: store.ID})
	ok(t, err, "retrieve")
	checkVersion(t, got)
	eqSlice(t, []string{got.ID, string(got.Operation), got.Content, got.Path}, []string{upd.MemoryVersionID, "modified", "second", "/v.md"}, "retrieve is full by default")
	gotBasic, err := f.versions().Get(f.ctx, upd.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: store.ID, View: anthropic.BetaManagedAgentsMemoryViewBasic})
	ok(t, err, "retrieve view=basic")
	eq(t, rawField(t, gotBasic.RawJSON(), "content"), "null", "retrieve view=basic")
	_, err = f.versions().Get(f.ctx, "memver_0000000000000000000000", anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "unknown version")
}

func TestVersionsFiltersAndPages(t *testing.T) {
	f := newFixture(t)
	h := f.history()
	other := f.newMemory(h.store.ID, "/other.md", "o")
	list := func(p anthropic.BetaMemoryStoreMemoryVersionListParams) []anthropic.BetaManagedAgentsMemoryVersion {
		return f.allVersions(h.store.ID, p)
	}
	ofMem := list(anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: param.NewOpt(h.mem.ID)})
	eqSlice(t, operations(ofMem), []string{"deleted", "modified", "modified", "created"}, "memory_id after the delete")
	createdOnly := list(anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: anthropic.BetaManagedAgentsMemoryVersionOperationCreated})
	eqSlice(t, []string{createdOnly[0].MemoryID, createdOnly[1].MemoryID}, []string{other.ID, h.mem.ID}, "operation=created")
	eq(t, len(list(anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: anthropic.BetaManagedAgentsMemoryVersionOperationDeleted})), 1, "operation=deleted")
	keyID := ofMem[0].CreatedBy.APIKeyID
	eq(t, len(list(anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: param.NewOpt(keyID)})), 5, "api_key_id")
	eq(t, len(list(anthropic.BetaMemoryStoreMemoryVersionListParams{APIKeyID: param.NewOpt("apikey_0000000000000000000000")})), 0, "an unknown api_key_id")

	all := versionIDs(list(anthropic.BetaMemoryStoreMemoryVersionListParams{}))
	first, err := f.versions().List(f.ctx, h.store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{Limit: param.NewOpt[int64](2)})
	pages := allPages(t, first, err)
	eq(t, len(pages), 3, "5 versions, limit 2: 3 pages")
	var walked []string
	for _, p := range pages {
		walked = append(walked, versionIDs(p.Data)...)
	}
	eqSlice(t, walked, all, "GetNextPage traversal")
	_, err = f.versions().List(f.ctx, h.store.ID, anthropic.BetaMemoryStoreMemoryVersionListParams{Operation: "renamed"})
	expectInvalid(t, err, "operation=renamed")
}

func TestVersionsRedactAnOldVersion(t *testing.T) {
	f := newFixture(t)
	store := f.newStore()
	mem := f.newMemory(store.ID, "/secret.md", "password=hunter2")
	upd, err := f.memories().Update(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: store.ID, Content: param.NewOpt("password=<removed>")})
	ok(t, err, "update")
	before, err := f.versions().Get(f.ctx, mem.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: store.ID})
	ok(t, err, "retrieve")

	red, err := f.versions().Redact(f.ctx, mem.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: store.ID})
	ok(t, err, "redact")
	checkVersion(t, red)
	eqSlice(t, []string{red.ID, string(red.Operation), red.MemoryID}, []string{mem.MemoryVersionID, "created", mem.ID}, "redacted version")
	for _, field := range []string{"content", "path", "content_sha256", "content_size_bytes"} {
		eq(t, rawField(t, red.RawJSON(), field), "null", "redacted "+field)
	}
	rfc3339Field(t, red.RawJSON(), "redacted_at", "redacted")
	eq(t, red.RedactedBy.Type, "api_actor", "redacted_by.type")
	eq(t, red.CreatedBy.APIKeyID, before.CreatedBy.APIKeyID, "created_by unchanged")
	eq(t, red.CreatedAt, before.CreatedAt, "created_at unchanged")

	got, err := f.versions().Get(f.ctx, mem.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: store.ID})
	ok(t, err, "retrieve after redaction")
	eq(t, got.RawJSON(), red.RawJSON(), "retrieve after redaction")
	tick()
	again, err := f.versions().Redact(f.ctx, mem.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: store.ID})
	ok(t, err, "redact again")
	eq(t, again.RawJSON(), red.RawJSON(), "redacting again changes nothing")
	eq(t, f.get(store.ID, mem.ID).Content, "password=<removed>", "the memory is untouched")

	_, err = f.versions().Redact(f.ctx, upd.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: store.ID})
	expectInvalid(t, err, "redact the current version")
	_, err = f.versions().Redact(f.ctx, "memver_0000000000000000000000", anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: store.ID})
	expectNotFound(t, err, "redact an unknown version")
	_, err = f.memories().Delete(f.ctx, mem.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: store.ID})
	ok(t, err, "delete")
	after, err := f.versions().Redact(f.ctx, upd.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: store.ID})
	ok(t, err, "after the delete, the last version before it is no longer current")
	rfc3339Field(t, after.RawJSON(), "redacted_at", "redacted after delete")
}
