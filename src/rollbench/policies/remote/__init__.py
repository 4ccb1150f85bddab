"""Remote policies: a policy served by another process, reached over a wire. Modules:

* :mod:`.ws`: ``--policy ws://HOST:PORT``, the openpi websocket protocol (``make_ws_policy``);
* :mod:`.http`: ``--policy http://HOST:PORT[/PATH]``, rollbench's JSON /act protocol, specified in its docstring
  (``make_http_policy``);
* :mod:`.base`: what both clients share (options, PolicyInfo from the server's metadata, resets, batch requests).
"""
