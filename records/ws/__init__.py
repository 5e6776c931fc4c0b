"""The websocket `/ws/events` (docs/api.md, The websocket /ws/events).

Every message comes from committed rows, so nothing is ever sent before the indexer's commit.
A client gets a snapshot (`snapshot`), then the live feed (`feed`) through its own bounded queue
(`outbox`), or, resuming with `?since=`, only what it missed (`stream`). The messages and their
frames are `messages`; the change kinds are `records.changes`; the consumer and its limits are
`consumer` and `limits`.
"""
