// Agents, environments and their keys, sessions, events (list filters, order, pages, the SSE
// stream through the SDK's ssestream) and the work queue through the Go SDK.
package compat

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// workerSetup is the operator's objects for a session: an agent with the built-in toolset, a
// self-hosted environment, and an environment key minted through mnemo's
// `POST /v1/environments/{id}/keys` (the SDK has no method for it).
type setup struct {
	agent, env, key string
}

func (f *fixture) workerSetup() setup {
	f.t.Helper()
	tag := unique("w")
	agent, err := f.client.Beta.Agents.New(f.ctx, anthropic.BetaAgentNewParams{
		Name:  "compat-go-agent-" + tag,
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-opus-4-6"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}},
	})
	ok(f.t, err, "create an agent")
	env, err := f.client.Beta.Environments.New(f.ctx, anthropic.BetaEnvironmentNewParams{
		Name:   "compat-go-env-" + tag,
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}},
	})
	ok(f.t, err, "create a self-hosted environment")
	eq(f.t, env.Config.Type, "self_hosted", "environment config.type")
	key := apiRequest(f.t, f.server.BaseURL, f.server.APIKey, "POST", "/v1/environments/"+env.ID+"/keys", map[string]any{})
	eq(f.t, key.Status, 200, "POST /v1/environments/{id}/keys: "+key.Text)
	eq(f.t, key.Body["type"], any("environment_key"), "key type")
	k, _ := key.Body["key"].(string)
	prefixed(f.t, k, "sk-mnemo-env-", "environment key")
	return setup{agent: agent.ID, env: env.ID, key: k}
}

// agentMessages sends agent.message events (the agent's side of a session, which the SDK's
// typed Send has no variant for) through the SDK's Send with the body's events set.
func (f *fixture) agentMessages(sessionID string, texts ...string) *anthropic.BetaManagedAgentsSendSessionEvents {
	f.t.Helper()
	var events []map[string]any
	for _, text := range texts {
		events = append(events, map[string]any{"type": "agent.message", "content": []map[string]any{{"type": "text", "text": text}}})
	}
	sent, err := f.client.Beta.Sessions.Events.Send(f.ctx, sessionID, anthropic.BetaSessionEventSendParams{}, option.WithJSONSet("events", events))
	ok(f.t, err, "send agent.message events")
	return sent
}

func TestSessionsEnvironmentsLifecycle(t *testing.T) {
	f := newFixture(t)
	c := &f.client.Beta.Environments
	env, err := c.New(f.ctx, anthropic.BetaEnvironmentNewParams{
		Name:     unique("env"),
		Config:   anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}},
		Metadata: map[string]string{"a": "1", "b": "2"},
	})
	ok(t, err, "create")
	prefixed(t, env.ID, "env_", "environment id")
	eq(t, string(env.Type), "environment", "type")
	got, err := c.Get(f.ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	ok(t, err, "retrieve")
	eq(t, got.RawJSON(), env.RawJSON(), "retrieve equals create")
	upd, err := c.Update(f.ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Description: param.NewOpt("described"), Metadata: map[string]string{"a": "one"}}, option.WithJSONSet("metadata.b", nil))
	ok(t, err, "update")
	eq(t, upd.Description, "described", "description")
	eq(t, fmt.Sprint(upd.Metadata), fmt.Sprint(map[string]string{"a": "one"}), "metadata patch")
	listed := func(includeArchived bool) bool {
		p := c.ListAutoPaging(f.ctx, anthropic.BetaEnvironmentListParams{Limit: param.NewOpt[int64](1), IncludeArchived: param.NewOpt(includeArchived)})
		for _, e := range collect(t, p.Next, p.Current, p.Err) {
			if e.ID == env.ID {
				return true
			}
		}
		return false
	}
	eq(t, listed(false), true, "listed (limit 1, auto-pagination)")
	arch, err := c.Archive(f.ctx, env.ID, anthropic.BetaEnvironmentArchiveParams{})
	ok(t, err, "archive")
	rfc3339Field(t, arch.RawJSON(), "archived_at", "archived environment")
	_, err = c.Update(f.ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Name: param.NewOpt("x")})
	e := expectInvalid(t, err, "update an archived environment")
	eq(t, e.Details.ErrorCode, "environment_archived", "error.details.error_code")
	eq(t, listed(false), false, "archived: not listed by default")
	eq(t, listed(true), true, "include_archived")
	del, err := c.Delete(f.ctx, env.ID, anthropic.BetaEnvironmentDeleteParams{})
	ok(t, err, "delete")
	eq(t, del.ID, env.ID, "deleted id")
	eq(t, string(del.Type), "environment_deleted", "deleted type")
	_, err = c.Get(f.ctx, env.ID, anthropic.BetaEnvironmentGetParams{})
	expectNotFound(t, err, "retrieve a deleted environment")
}

func TestSessionsLifecycleAndEventsFiltersOrderPages(t *testing.T) {
	f := newFixture(t)
	su := f.workerSetup()
	agent, err := f.client.Beta.Agents.Get(f.ctx, su.agent, anthropic.BetaAgentGetParams{})
	ok(t, err, "retrieve the agent")
	eq(t, agent.ID, su.agent, "agent id")
	s := &f.client.Beta.Sessions
	session, err := s.New(f.ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(su.agent)}, EnvironmentID: su.env, Title: param.NewOpt("go compat"),
	})
	ok(t, err, "create a session")
	prefixed(t, session.ID, "sesn_", "session id")
	eq(t, session.Title, "go compat", "title")
	got, err := s.Get(f.ctx, session.ID, anthropic.BetaSessionGetParams{})
	ok(t, err, "retrieve")
	eq(t, got.ID, session.ID, "retrieved id")
	p := s.ListAutoPaging(f.ctx, anthropic.BetaSessionListParams{Limit: param.NewOpt[int64](2)})
	found := false
	for _, x := range collect(t, p.Next, p.Current, p.Err) {
		found = found || x.ID == session.ID
	}
	eq(t, found, true, "listed (limit 2, auto-pagination)")
	renamed, err := s.Update(f.ctx, session.ID, anthropic.BetaSessionUpdateParams{Title: param.NewOpt("renamed")})
	ok(t, err, "update")
	eq(t, renamed.Title, "renamed", "title")

	sent := f.agentMessages(session.ID, "one", "two")
	var sentIDs []string
	for _, e := range sent.Data {
		eq(t, e.Type, "agent.message", "sent type")
		prefixed(t, e.ID, "sevt_", "event id")
		sentIDs = append(sentIDs, e.ID)
	}
	eq(t, len(sentIDs), 2, "events sent")
	ids := func(params anthropic.BetaSessionEventListParams) []string {
		p := s.Events.ListAutoPaging(f.ctx, session.ID, params)
		var out []string
		for _, e := range collect(t, p.Next, p.Current, p.Err) {
			out = append(out, e.ID)
		}
		return out
	}
	msgs := []anthropic.BetaManagedAgentsSessionEventType{"agent.message"}
	eqSlice(t, ids(anthropic.BetaSessionEventListParams{Types: msgs}), sentIDs, "types[] filter, oldest first")
	eqSlice(t, ids(anthropic.BetaSessionEventListParams{Types: msgs, Order: anthropic.BetaSessionEventListParamsOrderDesc}), []string{sentIDs[1], sentIDs[0]}, "order=desc")
	eqSlice(t, ids(anthropic.BetaSessionEventListParams{Types: msgs, Limit: param.NewOpt[int64](1)}), sentIDs, "limit=1 pages")
	if len(ids(anthropic.BetaSessionEventListParams{})) < 2 {
		t.Fatal("events listed")
	}

	arch, err := s.Archive(f.ctx, session.ID, anthropic.BetaSessionArchiveParams{})
	ok(t, err, "archive")
	rfc3339Field(t, arch.RawJSON(), "archived_at", "archived session")
	_, err = s.Events.Send(f.ctx, session.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		anthropic.BetaManagedAgentsEventParamsOfUserMessage([]anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "late"}}}),
	}})
	expectInvalid(t, err, "send to an archived session")
}

func TestSessionsStreamEventsCarriesWhatIsSentAfterwardsInOrder(t *testing.T) {
	f := newFixture(t)
	su := f.workerSetup()
	s := &f.client.Beta.Sessions
	session, err := s.New(f.ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(su.agent)}, EnvironmentID: su.env})
	ok(t, err, "create a session")
	stream := s.Events.StreamEvents(f.ctx, session.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	got := make(chan []string, 1)
	go func() {
		var texts []string
		for stream.Next() {
			ev := stream.Current()
			if ev.Type == "agent.message" {
				var msg struct {
					Content []struct{ Text string } `json:"content"`
				}
				_ = json.Unmarshal([]byte(ev.RawJSON()), &msg)
				if len(msg.Content) == 0 {
					texts = append(texts, "an agent.message without content: "+ev.RawJSON())
					break
				}
				texts = append(texts, msg.Content[0].Text)
				if len(texts) == 5 {
					break
				}
			}
		}
		if err := stream.Err(); err != nil {
			texts = append(texts, "stream error: "+err.Error())
		}
		got <- texts
	}()
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("m%d", i))
		f.agentMessages(session.ID, want[i])
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case texts := <-got:
		eqSlice(t, texts, want, "agent messages through the stream")
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not carry 5 messages")
	}
}

func TestSessionsWorkQueue(t *testing.T) {
	f := newFixture(t)
	su := f.workerSetup()
	envClient := newClient(f.server.BaseURL, su.key)
	work := &envClient.Beta.Environments.Work
	none, err := work.Poll(f.ctx, su.env, anthropic.BetaEnvironmentWorkPollParams{BlockMs: param.NewOpt[int64](100)})
	ok(t, err, "an empty poll")
	if none != nil && none.ID != "" {
		t.Fatalf("an empty poll hands out nothing, got %s", none.RawJSON())
	}
	session, err := f.client.Beta.Sessions.New(f.ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: param.NewOpt(su.agent)}, EnvironmentID: su.env})
	ok(t, err, "create a session")
	p := work.ListAutoPaging(f.ctx, su.env, anthropic.BetaEnvironmentWorkListParams{})
	items := collect(t, p.Next, p.Current, p.Err)
	eq(t, len(items), 1, "one work item")
	eqSlice(t, []string{string(items[0].Data.Type), items[0].Data.ID, string(items[0].State)}, []string{"session", session.ID, "queued"}, "the item")
	stats, err := work.Stats(f.ctx, su.env, anthropic.BetaEnvironmentWorkStatsParams{})
	ok(t, err, "stats")
	eq(t, string(stats.Type), "work_queue_stats", "stats type")
	eq(t, stats.Depth, int64(1), "stats.depth")
	polled, err := work.Poll(f.ctx, su.env, anthropic.BetaEnvironmentWorkPollParams{BlockMs: param.NewOpt[int64](500), AnthropicWorkerID: param.NewOpt("go-compat-worker")})
	ok(t, err, "poll")
	eq(t, polled.ID, items[0].ID, "the poll hands out the queued item")
	if polled.Secret == "" {
		t.Fatal("the polled item carries its secret")
	}
	acked, err := work.Ack(f.ctx, polled.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: su.env})
	ok(t, err, "ack")
	if acked.AcknowledgedAt == "" {
		t.Fatal("acknowledged_at is set")
	}
	upd, err := f.client.Beta.Environments.Work.Update(f.ctx, polled.ID, anthropic.BetaEnvironmentWorkUpdateParams{
		EnvironmentID: su.env, BetaSelfHostedWorkUpdateRequest: anthropic.BetaSelfHostedWorkUpdateRequestParam{Metadata: map[string]string{"k": "v"}},
	}, option.WithJSONSet("metadata.gone", nil))
	ok(t, err, "update metadata")
	eq(t, fmt.Sprint(upd.Metadata), fmt.Sprint(map[string]string{"k": "v"}), "metadata")
	got, err := f.client.Beta.Environments.Work.Get(f.ctx, polled.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: su.env})
	ok(t, err, "retrieve")
	eq(t, got.Secret, "", "no secret outside the poll")
	after, err := work.Stats(f.ctx, su.env, anthropic.BetaEnvironmentWorkStatsParams{})
	ok(t, err, "stats")
	eq(t, after.Depth, int64(0), "stats.depth after the claim")
	stopped, err := work.Stop(f.ctx, polled.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: su.env, BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: param.NewOpt(true)}})
	ok(t, err, "forced stop")
	if stopped.State != "stopping" && stopped.State != "stopped" {
		t.Fatalf("state after a forced stop: %s", stopped.State)
	}
}
