package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestWatchEventJSON: "watch -o json" prints the API's WatchEvent JSON,
// with how the key is held and the session, and the server's STARTED
// announcement.
func TestWatchEventJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ev   sdk.Event
		want *ticketv1.WatchEvent
	}{
		{sdk.Event{Index: 12, Type: sdk.EventGranted, Key: "k", Token: 3, Owner: "o", TTL: 5 * time.Second},
			&ticketv1.WatchEvent{Index: 12, Type: ticketv1.WatchEvent_TYPE_GRANTED, Key: "k", Token: 3, Owner: "o", LeaseMs: 5000}},
		{sdk.Event{Index: 13, Type: sdk.EventGranted, Key: "k", Token: 4, Owner: "o", TTL: time.Second, Mode: sdk.ModeShared, Session: 7},
			&ticketv1.WatchEvent{Index: 13, Type: ticketv1.WatchEvent_TYPE_GRANTED, Key: "k", Token: 4, Owner: "o", LeaseMs: 1000,
				Mode: ticketv1.Mode_MODE_SHARED, Session: 7}},
		{sdk.Event{Index: 14, Type: sdk.EventReleased, Key: "s", Token: 5, Limit: 2},
			&ticketv1.WatchEvent{Index: 14, Type: ticketv1.WatchEvent_TYPE_RELEASED, Key: "s", Token: 5, Limit: 2}},
		{sdk.Event{Index: 11, Type: sdk.EventStarted},
			&ticketv1.WatchEvent{Index: 11, Type: ticketv1.WatchEvent_TYPE_STARTED}},
	} {
		b, err := json.Marshal(watchJSON(c.ev))
		require.NoError(t, err)
		var ev ticketv1.WatchEvent
		require.NoError(t, protojson.Unmarshal(b, &ev), "%s", b)
		assert.True(t, proto.Equal(c.want, &ev), "%s: %v", b, &ev)
	}
}

// TestWatchEventText: "watch" names how a key is held when not exclusive,
// and the session.
func TestWatchEventText(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `13 GRANTED "k" token 4 owner "o" ttl 1s shared session 7`,
		watchText(sdk.Event{Index: 13, Type: sdk.EventGranted, Key: "k", Token: 4, Owner: "o", TTL: time.Second, Mode: sdk.ModeShared, Session: 7}))
	assert.Equal(t, `14 RELEASED "s" token 5 limit 2`, watchText(sdk.Event{Index: 14, Type: sdk.EventReleased, Key: "s", Token: 5, Limit: 2}))
	assert.Equal(t, `12 GRANTED "k" token 3 owner "o" ttl 5s`,
		watchText(sdk.Event{Index: 12, Type: sdk.EventGranted, Key: "k", Token: 3, Owner: "o", TTL: 5 * time.Second}))
}
