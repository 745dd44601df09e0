"""``server/redact.py``'s command-line redaction (what ``wattbench measure`` writes of the command)."""

from __future__ import annotations

from wattbench.server.redact import MASK, REDACTED, redact_argv


def test_redact_argv_masks_credentials_only():
    argv = ["vllm", "bench", "serve", "--api-key", "sk-1", "--base-url", "http://u:pw@h:1/v1", "--hf-token=abc",
            "-H", "Authorization: Bearer x", "-H", "X-Trace: 1", "--tokenizer", "/models/t",
            "--use-server-token-count", "--concurrency", "4", "--password", "--next-flag"]
    assert redact_argv(argv) == [
        "vllm", "bench", "serve", "--api-key", MASK, "--base-url", "http://***@h:1/v1", f"--hf-token={MASK}",
        "-H", f"Authorization: {REDACTED}", "-H", "X-Trace: 1", "--tokenizer", "/models/t",
        # a flag with no value does not mask the next flag; --tokenizer's value is a path, not a secret
        "--use-server-token-count", "--concurrency", "4", "--password", "--next-flag"]
    assert "sk-1" not in " ".join(redact_argv(argv)) and "pw" not in " ".join(redact_argv(argv))
