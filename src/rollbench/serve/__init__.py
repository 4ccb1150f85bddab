"""``rollbench serve-policy``: serving a policy over the openpi websocket protocol or JSON /act."""
