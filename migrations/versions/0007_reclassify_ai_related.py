"""recompute version.ai_related with the rule of docs/ai-related.md (categories, then title and abstract cues)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

Until now only the categories decided (cs.AI, cs.LG, cs.CL, cs.CV, cs.NE, cs.MA, stat.ML). Now cs.IR and cs.RO
count too, and so does a title that names the field or a method, or an abstract that names a method
(docs/ai-related.md). Every stored version is re-read in id order, BATCH rows at a time (keyset pages, so
memory stays flat however large a backfilled store is), and only the rows whose value changes are written.

The rule below is a frozen copy, on purpose, of core.papers.classify as it stood when this migration was
written: a migration carries its own logic, so that it does the same thing whatever the application's code
becomes (tests/test_migration_data.py checks that it agrees with the application today). Whenever
core.papers.classify changes what counts, add a migration with a copy of the new rule, or stored versions
keep the old answer.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

BATCH = 2000
# Say how far it got this often (rows), so a store of millions of versions does not look stuck.
PROGRESS_EVERY = 200_000

log = logging.getLogger("alembic.runtime.migration")

# ---- Frozen copy of core.papers.classify (the rule and its cues), not to be edited. ----

# Artificial intelligence, machine learning (cs and stat), computation and language, computer vision, neural
# and evolutionary computing, information retrieval, multiagent systems, robotics.
# Not here, measured in docs/ai-related.md: eess.AS, eess.IV, cs.SD (audio, image and sound processing) and
# q-bio.NC (neurons and cognition) also carry classical signal processing and neuroscience; their learning
# papers name their method and are found by the cues.
AI_CATEGORIES = frozenset({"cs.AI", "cs.LG", "cs.CL", "cs.CV", "cs.NE", "cs.IR", "cs.MA", "cs.RO", "stat.ML"})


# NamedTuple, not a dataclass as in the original: Alembic loads a migration without registering it in
# sys.modules, where a dataclass looks its module up.
class Cue(NamedTuple):
    """One cue: ``title_only`` for names of the field.

    ``spec`` is either a phrase — words separated by spaces, ``|`` between the forms of one word
    (``"neural network|networks"``), ``~`` instead of a space where the two words may also be written as one
    (``"self~supervised"``), ``*`` before the word to look for first (a rare one: ``"zero~*shot"``, see
    ``_gates``), a leading ``-`` when the phrase must not follow a hyphen — or, for an acronym, the exact
    words separated by spaces with ``acronym=True``.
    """

    label: str
    spec: str
    title_only: bool = False
    acronym: bool = False


def _field(label: str, spec: str = "", *, acronym: bool = False) -> Cue:
    """A name of the field: counts in the title only."""
    return Cue(label, spec or label, title_only=True, acronym=acronym)


def _method(label: str, spec: str = "", *, acronym: bool = False) -> Cue:
    """A method or model family: counts in the title and in the abstract."""
    return Cue(label, spec or label, acronym=acronym)


# In order of precedence: when several cues occur, the reason names the first one in this list.
# Deliberately absent, each a measured or well-known trap: bare "transformer" (power engineering), bare
# "attention" ("attracted much attention"), bare "learning", "active learning" and "online learning"
# (education), "fine-tuning" (the hierarchy problem in particle physics), "one-shot" (games, measurements),
# "embedding" (mathematics), "generative model" (statistics), "hallucination" (psychiatry), "object
# detection" (radar, astronomy), "speech recognition" without "automatic" (hearing research), "world
# model" ("brane world models" in cosmology), and the acronyms ML (maximum likelihood), RL
# (resistor-inductor), NLP (nonlinear programming), VLA (the radio telescope), LoRA (LoRa radio).
CUES: tuple[Cue, ...] = (
    # Names of the field: they count in the title only.
    _field("artificial intelligence"),
    _field("machine learning", "*machine learning"),
    _field("deep learning", "*deep learning"),
    _field("computer vision", "computer *vision"),
    _field("natural language processing", "natural *language processing"),
    _field("AI", "AI XAI GenAI AGI", acronym=True),
    # Methods and model families: they count in the title and in the abstract.
    _method("large language model", "large language model|models"),
    _method("vision-language model", "vision language"),
    _method("LLM", "LLM LLMs MLLM MLLMs LVLM LVLMs VLM VLMs", acronym=True),
    _method("GPT", "GPT GPT4 ChatGPT", acronym=True),
    _method("language model", "language model|models"),
    _method("foundation model", "foundation model|models"),
    _method("reinforcement learning"),
    _method("reinforcement learning", "DRL MARL RLHF", acronym=True),
    _method("self-supervised learning", "self~*supervised"),
    _method("semi-supervised learning", "semi~*supervised"),
    _method("unsupervised learning", "unsupervised learning"),
    _method("supervised learning", "supervised learning"),
    _method("contrastive learning"),
    _method("representation learning"),
    _method("federated learning"),
    _method("transfer learning"),
    _method("meta-learning", "*meta~learning"),
    _method("in-context learning", "in *context learning"),
    _method("imitation learning"),
    _method("continual learning"),
    _method("few-shot learning", "few~*shot"),
    _method("zero-shot learning", "zero~*shot"),
    _method("learning-based", "learning based"),
    _method("physics-informed neural network", "physics informed neural"),
    _method("graph neural network", "graph *neural network|networks"),
    _method("neural network", "neural network|networks|net|nets"),
    _method(
        "neural network", "CNN CNNs DNN DNNs GNN GNNs RNN RNNs LSTM LSTMs PINN PINNs ViT ViTs", acronym=True
    ),
    _method("neural operator", "*neural operator|operators"),
    _method("neural radiance field", "neural radiance field|fields"),
    _method("neural radiance field", "NeRF NeRFs", acronym=True),
    _method("Gaussian splatting", "gaussian splatting"),
    _method("generative adversarial network", "generative adversarial"),
    _method("generative adversarial network", "GAN GANs", acronym=True),
    _method("autoencoder", "auto~*encoder|encoders"),
    # "-": not after a hyphen, so "drift-diffusion model" and "reaction-diffusion models" (PDEs) stay out.
    _method("diffusion model", "-diffusion model|models"),
    _method("diffusion model", "denoising diffusion"),
    _method("diffusion model", "*latent diffusion"),
    _method("diffusion model", "stable diffusion"),
    _method("diffusion transformer", "diffusion transformer|transformers"),
    _method("vision transformer", "vision transformer|transformers"),
    _method("decision transformer", "decision transformer|transformers"),
    _method("transformer-based", "transformer based"),
    _method("self-attention", "self~*attention"),
    _method("self-attention", "cross~*attention"),
    _method("self-attention", "multi~head attention"),
    _method("self-attention", "graph attention"),
    _method("attention mechanism", "attention mechanism|mechanisms"),
    _method("pre-trained model", "*pre~trained model|models|network|networks|encoder|encoders|weights"),
    _method("BERT", "BERT RoBERTa", acronym=True),
    _method("text-to-image", "text to image|video|speech|3d"),
    _method("automatic speech recognition"),
    _method("machine translation"),
    _method("semantic segmentation"),
    _method("question answering", "question *answering"),
    _method("knowledge distillation"),
    _method("retrieval-augmented generation", "retrieval augmented"),
    _method("chain-of-thought", "chain of thought"),
    _method("instruction tuning", "instruction tuning|tuned|following"),
    _method("chatbot", "chatbot|chatbots"),
    _method("agentic"),
    _method("random forest", "random *forest|forests"),
    _method("support vector machine", "support vector machine|machines"),
    _method("gradient boosting", "gradient *boosting|boosted"),
)

# Every byte that is not an ASCII letter or digit becomes a space; non-ASCII characters arrive as "?"
# (encode errors="replace"). Every word a cue pattern can match is then one of the words split() returns,
# so looking up gate words never loses a match (the application's tests check it against a plain scan).
_WORD_BYTES = bytes(c if chr(c).isascii() and chr(c).isalnum() else 0x20 for c in range(256))
# Between the words of a phrase: whitespace and hyphens, ASCII or Unicode (U+2010, U+2011).
_SEPARATOR = "[\\s\\-\u2010\u2011]+"
_JOINED = "[\\s\\-\u2010\u2011]*"
_HYPHENS = "-\u2010\u2011"


def _cases(word: str) -> list[str]:
    """The ways a word is written in titles and abstracts: lower, Capitalised, UPPER."""
    return list(dict.fromkeys((word, word.capitalize(), word.upper())))


class _Compiled(NamedTuple):
    cue: Cue
    gates: frozenset[bytes]  # the words one of which every match contains, in every allowed spelling
    pattern: re.Pattern[str]
    after_hyphen: bool  # False: a match right after a hyphen does not count


def _compile(cue: Cue) -> _Compiled:
    """The regular expression and the gate words of one cue."""
    if cue.acronym:
        # A whole word: no ASCII letter or digit on either side, exactly the words the gate cuts out.
        spellings = "|".join(re.escape(word) for word in cue.spec.split())
        pattern = re.compile(f"(?<![A-Za-z0-9])(?:{spellings})(?![A-Za-z0-9])")
        return _Compiled(cue, frozenset(w.encode() for w in cue.spec.split()), pattern, True)
    # "*a~b c|d" -> words [[*a], [b], [c, d]] and the joins ["~", " "] between them.
    parts = re.split(r"( |~)", cue.spec.removeprefix("-"))
    words = [part.split("|") for part in parts[::2]]
    joins = parts[1::2]
    regex = _spellings(words[0])
    for join, forms in zip(joins, words[1:], strict=True):
        regex += (_JOINED if join == "~" else _SEPARATOR) + _spellings(forms)
    # The regex starts with literal text (no look-behind) so that the engine can jump to it quickly; the
    # left word boundary is checked on each hit instead (_found).
    return _Compiled(
        cue, _gates(words, joins), re.compile(f"(?:{regex})(?!\\w)"), not cue.spec.startswith("-")
    )


def _spellings(forms: list[str]) -> str:
    """A regex group for one word: each of its forms, in each of its cases."""
    return "(?:" + "|".join(re.escape(case) for case in _all_cases(forms)) + ")"


def _gates(words: list[list[str]], joins: list[str]) -> frozenset[bytes]:
    """Words of which every match of the phrase contains one, in every spelling.

    The word marked ``*`` in the spec, else the longest word not written together with a neighbour, else
    the first word. A word that may be written together with a neighbour (``~``) brings the joined forms
    too: "supervised" alone misses "selfsupervised". Rare gate words keep the per-cue check off most texts:
    measured on the recorded corpus, "shot" occurs in 6 of 1,154 non-AI texts, the "zero" of "zero-shot"
    in 60.
    """
    marked = [i for i, forms in enumerate(words) if forms[0].startswith("*")]
    joined_to_next = {i for i, join in enumerate(joins) if join == "~"}
    free = [i for i in range(len(words)) if i not in joined_to_next and i - 1 not in joined_to_next]
    if marked:
        best = marked[0]
    elif free:
        best = max(free, key=lambda i: len(words[i][0]))
    else:
        best = 0
    spellings = set(_all_cases(words[best]))
    if best in joined_to_next:
        spellings |= {
            a + b for a, b in itertools.product(_all_cases(words[best]), _all_cases(words[best + 1]))
        }
    if best - 1 in joined_to_next:
        spellings |= {
            a + b for a, b in itertools.product(_all_cases(words[best - 1]), _all_cases(words[best]))
        }
    return frozenset(spelling.encode() for spelling in spellings)


def _all_cases(forms: list[str]) -> list[str]:
    """Every spelling of every form of one word."""
    return [case for form in forms for case in _cases(form.lstrip("*"))]


def _by_gate(compiled: Iterable[_Compiled]) -> dict[bytes, tuple[int, ...]]:
    """Gate word -> the indexes (in CUES order) of the cues it opens."""
    table: dict[bytes, tuple[int, ...]] = {}
    for index, cue in enumerate(compiled):
        for gate in cue.gates:
            table[gate] = (*table.get(gate, ()), index)
    return table


_COMPILED = tuple(_compile(cue) for cue in CUES)
_BY_GATE = _by_gate(_COMPILED)
_GATES = frozenset(_BY_GATE)


def _found(compiled: _Compiled, text: str) -> bool:
    """True when ``compiled``'s cue occurs in ``text`` as whole words."""
    if compiled.cue.acronym:
        return compiled.pattern.search(text) is not None
    for match in compiled.pattern.finditer(text):
        start = match.start()
        if start == 0:
            return True
        before = text[start - 1]
        if before in _HYPHENS:
            if compiled.after_hyphen:
                return True
        elif not (before.isalnum() or before == "_"):  # what regex calls \w: a whole word only
            return True
    return False


def _candidates(*texts: str) -> list[int]:
    """Indexes (in CUES order) of the cues whose gate word occurs in any of ``texts``: one C-speed pass."""
    words = "\n".join(texts).encode("ascii", "replace").translate(_WORD_BYTES).split()
    present = _GATES.intersection(words)
    if not present:
        return []
    return sorted({index for gate in present for index in _BY_GATE[gate]})


def _first_cue(text: str, candidates: Iterable[int], *, title: bool) -> str | None:
    """The label of the first of ``candidates`` that occurs in ``text``, or None."""
    for index in candidates:
        compiled = _COMPILED[index]
        if compiled.cue.title_only and not title:
            continue
        if _found(compiled, text):
            return compiled.cue.label
    return None


def ai_category(categories: Iterable[str]) -> str | None:
    """The first of ``categories`` (primary first, then cross-lists) in :data:`AI_CATEGORIES`, or None."""
    for category in categories:
        if category in AI_CATEGORIES:
            return category
    return None


def ai_cue(title: str = "", abstract: str = "") -> str | None:
    """Which cue makes a title or an abstract AI-related: ``"title: large language model"``,
    ``"abstract: neural network"``; None when neither has one. The title is read first, with every cue;
    the abstract with the method cues only."""
    # One gate pass over both texts (a superset of each one's words), then each text on its own.
    candidates = _candidates(title, abstract)
    if not candidates:
        return None
    label = _first_cue(title, candidates, title=True)
    if label is not None:
        return f"title: {label}"
    label = _first_cue(abstract, candidates, title=False)
    if label is not None:
        return f"abstract: {label}"
    return None


def is_ai_related(categories: Iterable[str], title: str = "", abstract: str = "") -> bool:
    """True when a category, primary or cross-list, is in :data:`AI_CATEGORIES`, or the title or the abstract
    has an AI cue. Without a title and abstract, the categories alone decide."""
    return ai_category(categories) is not None or ai_cue(title, abstract) is not None


# ---- End of the frozen copy. ----


def upgrade() -> None:
    bind = op.get_bind()
    version = sa.table(
        "version",
        sa.column("id", sa.Integer),
        sa.column("categories", sa.JSON),
        sa.column("title", sa.String),
        sa.column("abstract", sa.Text),
        sa.column("ai_related", sa.Boolean),
    )
    page = (
        sa.select(
            version.c.id, version.c.categories, version.c.title, version.c.abstract, version.c.ai_related
        )
        .where(version.c.id > sa.bindparam("after"))
        .order_by(version.c.id)
        .limit(BATCH)
    )
    change = (
        sa.update(version)
        .where(version.c.id == sa.bindparam("version_id"))
        .values(ai_related=sa.bindparam("value"))
    )
    after, seen, changed = 0, 0, 0
    while rows := bind.execute(page, {"after": after}).all():
        # The versions of one paper usually share their text (a snapshot backfill stores the latest
        # metadata for each): classify each distinct text once.
        verdicts: dict[tuple[Any, ...], bool] = {}
        updates = []
        for version_id, categories, title, abstract, stored in rows:
            key = (tuple(categories or ()), title or "", abstract or "")
            value = verdicts.get(key)
            if value is None:
                value = verdicts[key] = is_ai_related(*key)
            if value != bool(stored):
                updates.append({"version_id": version_id, "value": value})
        if updates:
            bind.execute(change, updates)
        after = rows[-1][0]
        changed += len(updates)
        if (seen + len(rows)) // PROGRESS_EVERY > seen // PROGRESS_EVERY:
            log.info("0007: %d versions re-classified so far, %d changed", seen + len(rows), changed)
        seen += len(rows)
    log.info("0007: %d versions re-classified, %d changed", seen, changed)


def downgrade() -> None:
    pass  # the new values are valid for older code too: it only counts them
