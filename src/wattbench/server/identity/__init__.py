"""A server's identity: what tells one server configuration from another, read from what the server
itself exposes (``ServerIdentity``, built by ``build.build_identity``; the history's configuration
key, ``results/configuration.py``, is made from it).

- the **target**: ``scheme://host:port[/path]`` of a ``--target`` URL (the default port written
  out, the host lower-cased, ``/v1`` dropped), never its user, password, query or fragment; for an
  engine wattbench launched, the engine's name (its port changes with every start; its flags are in
  ``ServerInfo.effective_config``);
- the **served model id**, the **engine** and the **version** it reports;
- the server's **effective configuration** where the engine exposes it, one small module per engine
  (``vllm``, ``sglang``, ``llamacpp``, ``tgi``, ``transformers``; ``generic`` for any other
  OpenAI-compatible server), each reading the answers ``server.detect`` already probed (the same
  requests, the same redirect rule and size cap: ``core/origin.py``) and keeping only settings that
  stay the same from one start of one configuration to the next: no uptime, counter, timestamp, slot
  state or size found by memory profiling. A probe that gave nothing leaves that part out and is
  listed in ``not_exposed``.

Common rules for every engine's settings (``settings``): nested objects are flattened to dotted
names; a value is a string (cut to ``MAX_TEXT``), a number, a boolean, null or a short list of
those; a name that can carry a credential (``core.redact.is_secret_setting``) is left out, as are
names that hold a host, a port, a directory, a log or a file (a ``*_path`` keeps its last component:
the file, not where it lies), as is a dotted name longer than ``MAX_NAME``; at most ``MAX_SETTINGS``
settings per source, and at most ``MAX_IDENTITY_BYTES`` (16 KiB) of settings in the whole identity,
cut before it is hashed (``build.build_identity``; what was left out is said in
``ServerIdentity.capped``). A probe's answer is read by the one bounded JSON reader
(``core/jsontext.py``): one nested deeper than it reads is no answer.
"""
