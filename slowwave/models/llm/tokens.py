"""Token counting for prompt budgets: the model's own tokenizer when there is one, else an estimate;
and the average that reader-set budgets (``context``, profiles) are counted in.

Import-light on purpose: ``transformers`` is imported only when a tokenizer is loaded, so the
claim stage can size chunks without pulling in a model runtime.
"""

from __future__ import annotations

import logging
import math
import re
from functools import cache
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

# any of these makes AutoTokenizer able to build the model's tokenizer from the folder alone
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")

# digits and ASCII punctuation: many tokenizers (Llama 2, Mistral, SmolLM, Qwen) give each its
# own token, and the episode headers are full of them (ISO timestamps)
_SINGLE = re.compile(r"[0-9!-/:-@\[-`{-~]")


class TokenCounter(Protocol):
    """Tokens a text costs in the prompt (no special tokens)."""

    def __call__(self, text: str, /) -> int: ...


def estimate_tokens(text: str) -> int:
    """A conservative token count for runtimes without a tokenizer (e.g. a hosted endpoint).

    One token per digit and per ASCII punctuation mark, one per 3 other ASCII characters
    (English BPE averages about 4; 3 leaves room), and per non-ASCII character its UTF-8 length
    minus one (2 per CJK character, 1 per Cyrillic, Greek or accented letter, 3 per emoji).
    On LoCoMo sessions it is 1.3-1.7x what SmolLM2's small 49k vocabulary counts, and above it
    on timestamp headers, JSON, Cyrillic and Japanese samples; large-vocabulary tokenizers
    count fewer. Each term is additive or a rounded-up share, so the estimate of a joined text
    is never more than the sum of its parts' estimates: counting lines one by one is safe.
    """
    ascii_chars = len(text.encode("ascii", "ignore"))
    non_ascii_tokens = len(text.encode("utf-8")) - ascii_chars - (len(text) - ascii_chars)
    single = len(_SINGLE.findall(text))
    return single + -(-(ascii_chars - single) // 3) + non_ascii_tokens


# JSON around each item an answer gives ({"pair":"P1","now":"..."}, a category, a message id)
# and around the answer itself
ANSWER_ITEM_TOKENS = 64
ANSWER_TOKENS = 64


def answer_cap(shown: str, items: int) -> int:
    """The completion tokens an answer that restates what ``shown`` says, item by item
    (``items`` pairs or messages asked about), can need: twice the conservative estimate of
    ``shown`` (several facts from one message restate it with a name each) and room for each
    item's JSON. A model that repeats itself stops here instead of at the runtime's cap: a
    change check's answer is one sentence, not 1,024 tokens."""
    return 2 * estimate_tokens(shown) + ANSWER_ITEM_TOKENS * items + ANSWER_TOKENS


def average_tokens(text: str) -> int:
    """A model-agnostic average, about four characters a token, for the budgets a reader sets:
    ``context``'s facts and a profile's length. Not for prompts, which ``estimate_tokens``
    bounds from above: on timestamps, digits and non-Latin text this counts far fewer."""
    return math.ceil(len(text) / 4)


class TokenizerCounter:
    """Counts with a Hugging Face tokenizer; a class, not a closure, so that it pickles."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str, /) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


@cache
def model_token_counter(model_dir: Path) -> TokenCounter:
    """The counter of the model in ``model_dir`` (loaded once per folder), else the estimate.

    Only local files are read. A folder without tokenizer files, or one whose tokenizer does not
    load, falls back to ``estimate_tokens`` with a log line saying so.
    """
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        log.info("no tokenizer files in %s: token counts are estimated", model_dir)
        return estimate_tokens
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (ImportError, OSError, ValueError) as exc:
        log.warning(
            "cannot load the tokenizer in %s (%s): token counts are estimated", model_dir, exc
        )
        return estimate_tokens
    return TokenizerCounter(tokenizer)
