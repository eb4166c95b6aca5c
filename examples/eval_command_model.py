"""A command "model" for ``gcfkit eval --model command:...``: it reads the prompt on stdin
and prints the answer gcfkit's reference reader computes (gcfkit.eval.oracle).

It is not a model: it shows the command protocol (prompt on stdin, answer on stdout,
GCFKIT_EVAL_TEMPERATURE / GCFKIT_EVAL_SEED / GCFKIT_EVAL_MAX_TOKENS in the environment)
and lets the harness be checked end to end without a network::

    gcfkit eval --model "command:python examples/eval_command_model.py" --formats json,gcf
"""

from __future__ import annotations

import sys

from gcfkit.eval.oracle import answer


def main() -> int:
    prompt = sys.stdin.read()
    try:
        sys.stdout.write(answer(prompt) + "\n")
    except ValueError as e:
        sys.stdout.write(f"I cannot read this prompt ({e})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
