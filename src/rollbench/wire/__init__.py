"""What crosses the network: decoding and checking untrusted arrays and messages, observation maps."""
